/*
 * prelude_ctx.js — host services on ctx (`ctx.callAI(...)`, `ctx.db.sql.query(...)`, …),
 * ctx.secrets, ctx.mcp.
 *
 * Host services: every method turns into
 *   toolCall("service:" + dottedName, JSON.stringify([arg0, arg1, ...]), undefined)
 * (the arguments array; functions such as progress callbacks serialise to null
 * and are never called). `{ok: json}` → the parsed value; `{err}` → a rejected
 * Error with `.code`, `.kind`, `.details`. Which tool a name maps to is the host
 * operator's decision.
 *
 * Service names found in the registry (static grep + a dynamic survey that ran every
 * handler against a recording ctx):
 *   callAI (+ callAI.embeddings), callAIWithTools, callEmbeddings, callImageGenerator,
 *   callImageEditor, callImageUpscaler, callVideoGenerator, callSpeechToText,
 *   callTextToSpeech, callReranker, webSearch, invokeSubWorkflow, publishEvent,
 *   respondToWebhook, graphqlSubscribe, applyErrorDirective,
 *   aiEnvelope.{generate,await}, aiProviders.{callImageEditor,webSearch},
 *   agentRuntime.{run,message,route,skill,spawn,swarm,vote},
 *   a2a.{sendMessage,sendAndStream,getTask,listTasks,cancelTask,resubscribe,discoverAgent,
 *        publishAgentCard,emitStatus,emitArtifact,pushSend,pushConfig.{create,get,list,delete}},
 *   db.sql.{query,execute,transaction}, db.nosql.{find,insert,update,delete},
 *   db.search.{index,query}, db.vector.{upsert,query,delete},
 *   storage.blob.{get,put,presign}, storage.cache.{get,put,evict},
 *   storage.kv.{get,set,delete,list,cas,atomicIncrement}, storage.queue.{enqueue,dequeue},
 *   storage.table.{insert,query,update,upsert,delete,count},
 *   fs.{read,write,list,stat,delete}, fs.archive.{create,extract},
 *   fs.image.{crop,resize,formatConvert}, fs.pdf.{extractText,merge,split},
 *   fs.ftp.invoke, fs.sftp.invoke, fs.ssh.run,
 *   queueBus.{publish,ack,nack,deadLetter,streamPublish}, grpc.{unary,serverStream,clientStream,bidi},
 *   kanban.{automateRules,boardCreate,boardReview,getReadyTasks,moveTask,resourceMonitor,
 *           taskAssign,taskCreateBatch,taskGet,timelinePlan},
 *   chat.{emitCard,updateCard,sendMessage}, canvas.{create,read,write,invoke},
 *   coordination.{compete,consensus,delegate,mapReduce,roundRobin,vote,canvasCreate,
 *                 canvasRead,canvasWrite,crossCanvasInvoke},
 *   dataIntegration.{applyBinding,computeVariable,fetchA2A,fetchGraphql,fetchMCP,fetchRest,
 *                    fetchVariable,transform},
 *   campaignMessaging.{isReady,sendEmail,sendSms}, messaging.{dispatchEgressEnvelope,sendSms},
 *   email.send, slack.postMessage, notification.push, voice.{tts,placeCall},
 *   webResearch.{search,research,fetchBatch}, knowledge.retrieve, promptLibrary.get,
 *   launchStudio.{buildProjectContext,getStudio,resolveLinkedArtifacts},
 *   entities.{createProject,getAsset,listAssets},
 *   brand.{validatePersona,validateTheme,publishTheme,publishPersona},
 *   guardrails.evaluate, observability.{metric,log,alert,startSpan,endSpan},
 *   sideEffects.{tryAcquire,markCompleted,markFailed}, upload.resumable, websocket.connect.
 * Not services: ctx.http.safeFetch is the global fetch (the host's safe-fetch);
 * ctx.terminate is deliberately absent (core.flow.fail then throws its coded error).
 */
(function () {
  'use strict';
  const P = globalThis.__wop.__p;

  const SERVICES = [
    'callAI', 'callAI.embeddings', 'callAIWithTools', 'callEmbeddings', 'callImageGenerator', 'callImageEditor',
    'callImageUpscaler', 'callVideoGenerator', 'callSpeechToText', 'callTextToSpeech', 'callReranker',
    'webSearch', 'invokeSubWorkflow', 'publishEvent', 'respondToWebhook', 'graphqlSubscribe', 'applyErrorDirective',
    'aiEnvelope.generate', 'aiEnvelope.await', 'aiProviders.callImageEditor', 'aiProviders.webSearch',
    'agentRuntime.run', 'agentRuntime.message', 'agentRuntime.route', 'agentRuntime.skill', 'agentRuntime.spawn',
    'agentRuntime.swarm', 'agentRuntime.vote',
    'a2a.sendMessage', 'a2a.sendAndStream', 'a2a.getTask', 'a2a.listTasks', 'a2a.cancelTask', 'a2a.resubscribe',
    'a2a.discoverAgent', 'a2a.publishAgentCard', 'a2a.emitStatus', 'a2a.emitArtifact', 'a2a.pushSend',
    'a2a.pushConfig.create', 'a2a.pushConfig.get', 'a2a.pushConfig.list', 'a2a.pushConfig.delete',
    'db.sql.query', 'db.sql.execute', 'db.sql.transaction', 'db.nosql.find', 'db.nosql.insert', 'db.nosql.update',
    'db.nosql.delete', 'db.search.index', 'db.search.query', 'db.vector.upsert', 'db.vector.query', 'db.vector.delete',
    'storage.blob.get', 'storage.blob.put', 'storage.blob.presign', 'storage.cache.get', 'storage.cache.put',
    'storage.cache.evict', 'storage.kv.get', 'storage.kv.set', 'storage.kv.delete', 'storage.kv.list', 'storage.kv.cas',
    'storage.kv.atomicIncrement', 'storage.queue.enqueue', 'storage.queue.dequeue', 'storage.table.insert',
    'storage.table.query', 'storage.table.update', 'storage.table.upsert', 'storage.table.delete', 'storage.table.count',
    'fs.read', 'fs.write', 'fs.list', 'fs.stat', 'fs.delete', 'fs.archive.create', 'fs.archive.extract',
    'fs.image.crop', 'fs.image.resize', 'fs.image.formatConvert', 'fs.pdf.extractText', 'fs.pdf.merge', 'fs.pdf.split',
    'fs.ftp.invoke', 'fs.sftp.invoke', 'fs.ssh.run',
    'queueBus.publish', 'queueBus.ack', 'queueBus.nack', 'queueBus.deadLetter', 'queueBus.streamPublish',
    'grpc.unary', 'grpc.serverStream', 'grpc.clientStream', 'grpc.bidi',
    'kanban.automateRules', 'kanban.boardCreate', 'kanban.boardReview', 'kanban.getReadyTasks', 'kanban.moveTask',
    'kanban.resourceMonitor', 'kanban.taskAssign', 'kanban.taskCreateBatch', 'kanban.taskGet', 'kanban.timelinePlan',
    'chat.emitCard', 'chat.updateCard', 'chat.sendMessage', 'canvas.create', 'canvas.read', 'canvas.write', 'canvas.invoke',
    'coordination.compete', 'coordination.consensus', 'coordination.delegate', 'coordination.mapReduce',
    'coordination.roundRobin', 'coordination.vote', 'coordination.canvasCreate', 'coordination.canvasRead',
    'coordination.canvasWrite', 'coordination.crossCanvasInvoke',
    'dataIntegration.applyBinding', 'dataIntegration.computeVariable', 'dataIntegration.fetchA2A',
    'dataIntegration.fetchGraphql', 'dataIntegration.fetchMCP', 'dataIntegration.fetchRest',
    'dataIntegration.fetchVariable', 'dataIntegration.transform',
    'campaignMessaging.isReady', 'campaignMessaging.sendEmail', 'campaignMessaging.sendSms',
    'messaging.dispatchEgressEnvelope', 'messaging.sendSms', 'email.send', 'slack.postMessage', 'notification.push',
    'voice.tts', 'voice.placeCall', 'webResearch.search', 'webResearch.research', 'webResearch.fetchBatch',
    'knowledge.retrieve', 'promptLibrary.get', 'launchStudio.buildProjectContext', 'launchStudio.getStudio',
    'launchStudio.resolveLinkedArtifacts', 'entities.createProject', 'entities.getAsset', 'entities.listAssets',
    'brand.validatePersona', 'brand.validateTheme', 'brand.publishTheme', 'brand.publishPersona', 'brand.implementTheme',
    'guardrails.evaluate', 'observability.metric', 'observability.log', 'observability.alert',
    'observability.startSpan', 'observability.endSpan', 'sideEffects.tryAcquire', 'sideEffects.markCompleted',
    'sideEffects.markFailed', 'upload.resumable', 'websocket.connect',
  ];

  // Split at prelude time: nothing below depends on String.prototype.split at run time.
  const PARTS = SERVICES.map((n) => n.split('.'));

  /** Synchronous host tool call → parsed ok value, or throws a coded Error. */
  function callTool(toolId, argsJson, idem) {
    const r = P.ReflectApply(P.n_toolCall, undefined, [toolId, argsJson, idem]);
    const err = P.own(r, 'err');
    if (err !== undefined && err !== null) {
      const code = P.own(err, 'code');
      const e = P.codedError(code === undefined || code === null ? P.StringCtor(P.own(err, 'kind') || 'failed') : P.StringCtor(code),
        P.StringCtor(P.own(err, 'message') || 'host tool call failed: ' + toolId), P.hostDetails(err));
      P.put(e, 'kind', P.own(err, 'kind'));
      throw e;
    }
    const ok = P.own(r, 'ok');
    return ok === undefined || ok === null || ok === '' ? undefined : P.JSONParse(ok);
  }
  P.callTool = callTool;

  /** The services the operator mapped for this pack (names), asked of the host once per invocation. */
  function mappedServices() {
    try {
      const v = callTool('service:run.services', '[]', undefined);
      return P.ArrayIsArray(v) ? v : [];
    } catch (_) {
      return [];
    }
  }
  P.mappedServices = mappedServices;

  // The first name of every service (`callAI`, `db`, …) and `obs` (the
  // alias of `observability`), for namesAnyService.
  const FIRST_NAMES = [];
  for (let i = 0; i < PARTS.length; i++) if (!FIRST_NAMES.includes(PARTS[i][0])) FIRST_NAMES.push(PARTS[i][0]);
  FIRST_NAMES.push('obs');

  /**
   * Whether `text` (a module's source) names a host service: a service's
   * first name as a whole word anywhere (`ctx.db.sql`, `{ callAI } = ctx`,
   * `'callAI' in ctx`, `ctx['fs']`). Run at build time, before the pack's
   * own code (intrinsics are the prelude's).
   */
  function namesAnyService(text) {
    const word = (c) => (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 36 || c === 95;
    for (let i = 0; i < FIRST_NAMES.length; i++) {
      const w = FIRST_NAMES[i];
      for (let at = text.indexOf(w); at !== -1; at = text.indexOf(w, at + 1)) {
        if (!word(text.charCodeAt(at - 1)) && !word(text.charCodeAt(at + w.length))) return true;
      }
    }
    return false;
  }
  P.namesAnyService = namesAnyService;

  function serviceMethod(name) {
    const id = 'service:' + name;
    return function () {
      try {
        const json = P.JSONStringify(P.ArraySlice(arguments));
        return P.PromiseResolve(callTool(id, json === undefined ? '[]' : json, undefined));
      } catch (e) {
        return P.PromiseReject(e);
      }
    };
  }

  /**
   * Builds the service tree of the services in `mapped` (the names the operator mapped to
   * tools; the host's answer to `run.services`): a service nobody mapped is absent, as on a
   * reference host without it, so a pack's `typeof ctx.x === 'function'` fallback runs.
   */
  function buildServices(target, mapped) {
    const want = new P.Map();
    for (let i = 0; i < mapped.length; i++) P.MapSet(want, P.StringCtor(mapped[i]), true);
    for (let i = 0; i < SERVICES.length; i++) {
      if (!P.MapHas(want, SERVICES[i])) continue;
      const parts = PARTS[i];
      let obj = target;
      for (let j = 0; j < parts.length; j++) {
        const k = parts[j];
        const leaf = j === parts.length - 1;
        const cur = P.own(obj, k);
        if (leaf) {
          const fn = serviceMethod(SERVICES[i]);
          if (cur !== undefined) { const ks = P.ObjectKeys(cur); for (let m = 0; m < ks.length; m++) P.put(fn, ks[m], cur[ks[m]]); }
          P.put(obj, k, fn);
        } else if (cur === undefined) {
          P.put(obj, k, {});
        }
        obj = obj[k];
      }
    }
    // core.openwop.obs accepts either name.
    if (P.own(target, 'observability') !== undefined) P.put(target, 'obs', target.observability);
    // The host's SSRF-guarded safe-fetch is the global fetch (core.openwop.http prefers ctx.http.safeFetch).
    P.put(target, 'http', { safeFetch: P.fetch });
    return target;
  }

  /* ---- secrets: the host returns an opaque handle, passed through untouched ---- */
  function buildSecrets() {
    return {
      resolve: serviceMethod('secrets.resolve'),
    };
  }

  /* ---- MCP (core.openwop.mcp's informative host contract) ---- */
  function mcpCall(op, serverId, a1, a2) {
    const r = P.ReflectApply(P.n_mcp, undefined, [op, serverId === undefined || serverId === null ? '' : P.StringCtor(serverId), a1, a2, undefined]);
    const err = P.own(r, 'err');
    if (err !== undefined && err !== null) {
      throw P.codedError(P.StringCtor(P.own(err, 'code') || 'mcp_failed'), P.StringCtor(P.own(err, 'message') || 'MCP call failed'), P.hostDetails(err));
    }
    const ok = P.own(r, 'ok');
    return ok === undefined || ok === null || ok === '' ? null : P.JSONParse(ok);
  }
  // Accepts both `f(serverId, ...)` and `f({serverId, ...})`.
  function sid(a) { return a !== null && typeof a === 'object' ? a.serverId : a; }
  function wrap(fn) {
    return function () {
      try { return P.PromiseResolve(P.ReflectApply(fn, undefined, P.ArraySlice(arguments))); } catch (e) { return P.PromiseReject(e); }
    };
  }
  function isObj(v) { return v !== null && typeof v === 'object' && !P.ArrayIsArray(v); }
  function buildMcp() {
    const mcp = {
      // listTools(serverId, cursor?) → {tools, nextCursor?}
      listTools: wrap((a, cursor) => {
        const c = isObj(a) ? a.cursor : cursor;
        const r = mcpCall('list-tools', sid(a), c === undefined || c === null ? undefined : P.StringCtor(c), undefined);
        return isObj(r) ? r : { tools: P.ArrayIsArray(r) ? r : [] };
      }),
      // invokeTool(serverId, toolName, args, opts?) → {result, isError, untrustedContent}
      invokeTool: wrap((a, toolName, args) => {
        if (isObj(a)) { toolName = a.toolName !== undefined ? a.toolName : a.name; args = a.args !== undefined ? a.args : a.arguments; }
        const json = P.JSONStringify(args === undefined || args === null ? {} : args);
        const r = mcpCall('call-tool', sid(a), P.StringCtor(toolName), json);
        if (isObj(r) && P.hasOwn(r, 'result')) return r;
        // MCP CallToolResult {content[], structuredContent?, isError?}: tool output is untrusted.
        const result = isObj(r) ? (r.structuredContent !== undefined ? r.structuredContent : r.content !== undefined ? r.content : r) : r;
        return { result, isError: isObj(r) && r.isError === true, untrustedContent: true };
      }),
      // readResource(serverId, uri, opts?) → {content, mimeType, encoding?}
      readResource: wrap((a, uri) => {
        if (isObj(a)) uri = a.uri;
        const r = mcpCall('read-resource', sid(a), P.StringCtor(uri), undefined);
        if (isObj(r) && P.hasOwn(r, 'content')) return r;
        // MCP ReadResourceResult {contents: [{uri, mimeType?, text? | blob?}]}
        const c = isObj(r) && P.ArrayIsArray(r.contents) ? r.contents[0] : undefined;
        if (!c) return { content: null, mimeType: '' };
        if (c.blob !== undefined) return { content: c.blob, mimeType: c.mimeType || '', encoding: 'base64' };
        return { content: c.text !== undefined ? c.text : null, mimeType: c.mimeType || '', encoding: 'utf-8' };
      }),
      // serverStatus(serverId, opts?) → {available, name?, version?, error?}
      serverStatus: wrap((a) => {
        const r = mcpCall('server-health', sid(a), undefined, undefined);
        if (isObj(r) && P.hasOwn(r, 'available')) return r;
        return isObj(r) ? Object.assign({ available: true }, r) : { available: r !== false };
      }),
      // ping({serverId}) → resolves when the server is healthy, rejects otherwise.
      ping: wrap((a) => {
        const r = mcpCall('server-health', sid(a), undefined, undefined);
        if (isObj(r) && r.available === false) throw P.codedError('mcp_unavailable', r.error ? P.StringCtor(r.error) : 'MCP server unavailable');
        return r;
      }),
    };
    const unsupported = ['listResources', 'listResourceTemplates', 'listPrompts', 'getPrompt', 'completion',
      'setLogLevel', 'subscribeResource', 'logListener', 'expose'];
    for (let i = 0; i < unsupported.length; i++) {
      const m = unsupported[i];
      P.put(mcp, m, function () { return P.PromiseReject(P.codedError('unsupported_mcp_method', 'ctx.mcp.' + m + ' is not supported by this host')); });
    }
    return mcp;
  }

  P.buildServices = buildServices;
  P.buildSecrets = buildSecrets;
  P.buildMcp = buildMcp;
})();
