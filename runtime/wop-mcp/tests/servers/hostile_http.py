"""A stdlib-only Streamable HTTP server whose tools/call misbehaves per path.

Usage: hostile_http.py PORT
  /ok        - well-behaved (legacy initialize, 2025-06-18), JSON answers
  /sse       - well-behaved, answers tools/call as an SSE stream
  /huge      - tools/call: 4 MiB JSON body
  /endless   - tools/call: chunked body that never ends
  /invalid   - tools/call: body that is not JSON
  /wrongid   - tools/call: JSON answer with another id
  /flood     - tools/call: SSE stream of 20000 notifications, a wrong-id
               response, then the answer
  /silent    - tools/call: never answers (holds the connection)
  /unknownrev- initialize answers protocolVersion 1999-01-01
  /expire    - sessions s1, s2, ...; a tools/call on session s1 gets 404
               (session expired), later sessions work
  /badutf8   - tools/call: a JSON body with invalid UTF-8 in a string
  /badutf8sse- tools/call: an SSE event with invalid UTF-8 in a string
"""
import json
import sys
import time
import itertools
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SESSIONS = itertools.count(1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _json(self, obj, status=200, session=None):
        body = json.dumps(obj).encode()
        self.send_response(status)
        if session:
            self.send_header("Mcp-Session-Id", session)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        msg = json.loads(self.rfile.read(length) or b"{}")
        mode = self.path.strip("/")
        method = msg.get("method")
        rid = msg.get("id")
        if rid is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if method == "server/discover":
            return self._json({"jsonrpc": "2.0", "id": rid,
                               "error": {"code": -32601, "message": "Method not found"}})
        if method == "initialize":
            version = "1999-01-01" if mode == "unknownrev" else "2025-06-18"
            session = "s%d" % next(SESSIONS) if mode == "expire" else None
            return self._json({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"}}}, session=session)
        if method == "ping":
            return self._json({"jsonrpc": "2.0", "id": rid, "result": {}})
        answer = {"jsonrpc": "2.0", "id": rid,
                  "result": {"content": [{"type": "text", "text": "ok"}], "isError": False}}
        if mode == "expire" and self.headers.get("Mcp-Session-Id") == "s1":
            return self._json({"jsonrpc": "2.0", "id": None,
                               "error": {"code": -32001, "message": "Session not found"}}, status=404)
        if mode == "huge":
            return self._json({"jsonrpc": "2.0", "id": rid, "result": {
                "content": [{"type": "text", "text": "x" * (4 * 1024 * 1024)}]}})
        if mode == "endless":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"z" * 65536
            try:
                head = b'{"jsonrpc":"2.0","id":%d,"result":{"t":"' % rid
                self.wfile.write(b"%x\r\n%s\r\n" % (len(head), head))
                deadline = time.time() + 60
                while time.time() < deadline:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        if mode in ("badutf8", "badutf8sse"):
            msg = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"\xff\xfe"}]}}' % rid
            if mode == "badutf8":
                body, ctype = msg, "application/json"
            else:
                body, ctype = b"event: message\ndata: " + msg + b"\n\n", "text/event-stream"
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if mode == "invalid":
            body = b"{not json"
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if mode == "wrongid":
            answer["id"] = rid + 1000
            return self._json(answer)
        if mode in ("flood", "sse"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                if mode == "flood":
                    for i in range(20000):
                        note = {"jsonrpc": "2.0", "method": "notifications/message",
                                "params": {"level": "info", "data": i}}
                        self.wfile.write(b"event: message\ndata: " + json.dumps(note).encode() + b"\n\n")
                    wrong = dict(answer, id=rid + 1000)
                    self.wfile.write(b"data: " + json.dumps(wrong).encode() + b"\n\n")
                self.wfile.write(b"event: message\ndata: " + json.dumps(answer).encode() + b"\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True
            return
        if mode == "silent":
            time.sleep(60)
            return
        return self._json(answer)


if __name__ == "__main__":
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
