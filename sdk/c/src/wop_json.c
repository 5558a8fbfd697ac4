/* wop_json.c -- the JSON parser and string builder of the C SDK (see wop.h). */
#include <stdlib.h>
#include <string.h>

#include "wop.h"

/* ---- string buffer ------------------------------------------------------ */

static void buf_reserve(wop_buf_t *b, size_t extra) {
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) abort();
    b->data = p;
    b->cap = cap;
}

void wop_buf_append(wop_buf_t *b, const char *s, size_t len) {
    buf_reserve(b, len);
    if (len) memcpy(b->data + b->len, s, len);
    b->len += len;
    b->data[b->len] = '\0';
}

void wop_buf_puts(wop_buf_t *b, const char *s) { wop_buf_append(b, s, strlen(s)); }

static void buf_putc(wop_buf_t *b, char c) { wop_buf_append(b, &c, 1); }

static void buf_unsigned(wop_buf_t *b, unsigned long long v, unsigned base) {
    char tmp[32];
    int n = 0;
    do {
        unsigned d = (unsigned)(v % base);
        tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v /= base;
    } while (v);
    while (n) buf_putc(b, tmp[--n]);
}

static void buf_signed(wop_buf_t *b, long long v) {
    if (v < 0) {
        buf_putc(b, '-');
        buf_unsigned(b, (unsigned long long)(-(v + 1)) + 1, 10);
    } else {
        buf_unsigned(b, (unsigned long long)v, 10);
    }
}

/* A small printf: the SDK avoids libc's stdio so packs import no WASI. */
void wop_buf_vprintf(wop_buf_t *b, const char *fmt, va_list ap) {
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') {
            buf_putc(b, *p);
            continue;
        }
        p++;
        int lng = 0, size = 0, prec = 0;
        if (*p == '.' && p[1] == '*') {
            prec = 1;
            p += 2;
        }
        while (*p == 'l') { lng++; p++; }
        if (*p == 'z') { size = 1; p++; }
        switch (*p) {
        case 's':
            if (prec) {
                int n = va_arg(ap, int);
                const char *s = va_arg(ap, const char *);
                wop_buf_append(b, s ? s : "(null)", s ? (size_t)n : 6);
            } else {
                const char *s = va_arg(ap, const char *);
                wop_buf_puts(b, s ? s : "(null)");
            }
            break;
        case 'd':
        case 'i':
            if (lng >= 2) buf_signed(b, va_arg(ap, long long));
            else if (lng == 1) buf_signed(b, va_arg(ap, long));
            else buf_signed(b, va_arg(ap, int));
            break;
        case 'u':
        case 'x':
            if (size) buf_unsigned(b, va_arg(ap, size_t), *p == 'x' ? 16 : 10);
            else if (lng >= 2) buf_unsigned(b, va_arg(ap, unsigned long long), *p == 'x' ? 16 : 10);
            else if (lng == 1) buf_unsigned(b, va_arg(ap, unsigned long), *p == 'x' ? 16 : 10);
            else buf_unsigned(b, va_arg(ap, unsigned), *p == 'x' ? 16 : 10);
            break;
        case 'c':
            buf_putc(b, (char)va_arg(ap, int));
            break;
        case '%':
            buf_putc(b, '%');
            break;
        case '\0':
            return;
        default:
            buf_putc(b, '%');
            buf_putc(b, *p);
        }
    }
}

void wop_buf_printf(wop_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wop_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

/* Length of the valid UTF-8 sequence at `s` (0 if invalid). */
static size_t utf8_seq_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0];
    size_t n;
    unsigned cp, min;
    if (c >= 0xc2 && c < 0xe0) { n = 2; cp = c & 31; min = 0x80; }
    else if (c >= 0xe0 && c < 0xf0) { n = 3; cp = c & 15; min = 0x800; }
    else if (c >= 0xf0 && c < 0xf5) { n = 4; cp = c & 7; min = 0x10000; }
    else return 0;
    if (avail < n) return 0;
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 63);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return 0;
    return n;
}

void wop_buf_json_string_n(wop_buf_t *b, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    buf_putc(b, '"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': wop_buf_puts(b, "\\\""); break;
        case '\\': wop_buf_puts(b, "\\\\"); break;
        case '\n': wop_buf_puts(b, "\\n"); break;
        case '\r': wop_buf_puts(b, "\\r"); break;
        case '\t': wop_buf_puts(b, "\\t"); break;
        case '\b': wop_buf_puts(b, "\\b"); break;
        case '\f': wop_buf_puts(b, "\\f"); break;
        default:
            if (c < 0x20) {
                char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                wop_buf_append(b, esc, 6);
            } else if (c < 0x80) {
                buf_putc(b, (char)c);
            } else {
                /* Copy a valid UTF-8 sequence; replace anything else with
                 * U+FFFD so the output is always valid JSON. */
                size_t n = utf8_seq_len((const unsigned char *)s + i, len - i);
                if (n) {
                    wop_buf_append(b, s + i, n);
                    i += n - 1;
                } else {
                    wop_buf_puts(b, "\xef\xbf\xbd");
                }
            }
        }
    }
    buf_putc(b, '"');
}

void wop_buf_json_string(wop_buf_t *b, const char *s) {
    if (!s) {
        wop_buf_puts(b, "null");
        return;
    }
    wop_buf_json_string_n(b, s, strlen(s));
}

const char *wop_buf_str(const wop_buf_t *b) { return b->data ? b->data : ""; }

void wop_buf_free(wop_buf_t *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- parser ------------------------------------------------------------- */

typedef struct {
    const char *s;
    size_t len;
    size_t pos;
    int depth;
} parser_t;

#define WOP_JSON_MAX_DEPTH 128

static void skip_ws(parser_t *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->pos++;
        else break;
    }
}

static wop_json_t *new_value(wop_json_kind_t kind) {
    wop_json_t *v = calloc(1, sizeof *v);
    if (!v) abort();
    v->kind = kind;
    return v;
}

static int hex4(const char *s, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

static void put_utf8(wop_buf_t *b, unsigned cp) {
    char t[4];
    if (cp < 0x80) {
        t[0] = (char)cp;
        wop_buf_append(b, t, 1);
    } else if (cp < 0x800) {
        t[0] = (char)(0xc0 | (cp >> 6));
        t[1] = (char)(0x80 | (cp & 63));
        wop_buf_append(b, t, 2);
    } else if (cp < 0x10000) {
        t[0] = (char)(0xe0 | (cp >> 12));
        t[1] = (char)(0x80 | ((cp >> 6) & 63));
        t[2] = (char)(0x80 | (cp & 63));
        wop_buf_append(b, t, 3);
    } else {
        t[0] = (char)(0xf0 | (cp >> 18));
        t[1] = (char)(0x80 | ((cp >> 12) & 63));
        t[2] = (char)(0x80 | ((cp >> 6) & 63));
        t[3] = (char)(0x80 | (cp & 63));
        wop_buf_append(b, t, 4);
    }
}

/* Parse a string at p->pos (which is at '"'); returns the decoded text. */
static char *parse_string(parser_t *p, size_t *out_len) {
    wop_buf_t b = {0};
    p->pos++; /* opening quote */
    while (p->pos < p->len) {
        unsigned char c = (unsigned char)p->s[p->pos++];
        if (c == '"') {
            *out_len = b.len;
            if (!b.data) wop_buf_append(&b, "", 0);
            return b.data;
        }
        if (c < 0x20) break;
        if (c != '\\') {
            buf_putc(&b, (char)c);
            continue;
        }
        if (p->pos >= p->len) break;
        char e = p->s[p->pos++];
        switch (e) {
        case '"': buf_putc(&b, '"'); break;
        case '\\': buf_putc(&b, '\\'); break;
        case '/': buf_putc(&b, '/'); break;
        case 'b': buf_putc(&b, '\b'); break;
        case 'f': buf_putc(&b, '\f'); break;
        case 'n': buf_putc(&b, '\n'); break;
        case 'r': buf_putc(&b, '\r'); break;
        case 't': buf_putc(&b, '\t'); break;
        case 'u': {
            unsigned cp;
            if (p->pos + 4 > p->len || !hex4(p->s + p->pos, &cp)) goto fail;
            p->pos += 4;
            if (cp >= 0xd800 && cp < 0xdc00) {
                unsigned lo;
                if (p->pos + 6 <= p->len && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u' &&
                    hex4(p->s + p->pos + 2, &lo) && lo >= 0xdc00 && lo < 0xe000) {
                    p->pos += 6;
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                } else {
                    cp = 0xfffd;
                }
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                cp = 0xfffd;
            }
            put_utf8(&b, cp);
            break;
        }
        default:
            goto fail;
        }
    }
fail:
    wop_buf_free(&b);
    return NULL;
}

static wop_json_t *parse_value(parser_t *p);

static int push_item(wop_json_t *v, wop_json_t *item, char *key, size_t *cap) {
    if (v->count == *cap) {
        *cap = *cap ? *cap * 2 : 4;
        v->items = realloc(v->items, *cap * sizeof *v->items);
        if (!v->items) abort();
        if (v->kind == WOP_JSON_OBJECT) {
            v->keys = realloc(v->keys, *cap * sizeof *v->keys);
            if (!v->keys) abort();
        }
    }
    v->items[v->count] = item;
    if (v->kind == WOP_JSON_OBJECT) v->keys[v->count] = key;
    v->count++;
    return 1;
}

static wop_json_t *parse_container(parser_t *p, int object) {
    wop_json_t *v = new_value(object ? WOP_JSON_OBJECT : WOP_JSON_ARRAY);
    size_t cap = 0;
    if (++p->depth > WOP_JSON_MAX_DEPTH) goto fail;
    p->pos++; /* [ or { */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) {
        p->pos++;
        p->depth--;
        return v;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(p);
        if (object) {
            size_t klen;
            if (p->pos >= p->len || p->s[p->pos] != '"') goto fail;
            key = parse_string(p, &klen);
            if (!key) goto fail;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                goto fail;
            }
            p->pos++;
        }
        wop_json_t *item = parse_value(p);
        if (!item) {
            free(key);
            goto fail;
        }
        push_item(v, item, key, &cap);
        skip_ws(p);
        if (p->pos >= p->len) goto fail;
        char c = p->s[p->pos++];
        if (c == ',') continue;
        if (c == (object ? '}' : ']')) break;
        goto fail;
    }
    p->depth--;
    return v;
fail:
    wop_json_free(v);
    return NULL;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static wop_json_t *parse_number(parser_t *p) {
    size_t start = p->pos;
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos >= p->len) return NULL;
    if (p->s[p->pos] == '0') {
        p->pos++;
    } else if (is_digit(p->s[p->pos])) {
        while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
    } else {
        return NULL;
    }
    if (p->pos < p->len && p->s[p->pos] == '.') {
        p->pos++;
        if (p->pos >= p->len || !is_digit(p->s[p->pos])) return NULL;
        while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (p->pos >= p->len || !is_digit(p->s[p->pos])) return NULL;
        while (p->pos < p->len && is_digit(p->s[p->pos])) p->pos++;
    }
    /* strtod needs a NUL-terminated copy. */
    size_t n = p->pos - start;
    char tmp[64];
    char *s = n < sizeof tmp ? tmp : malloc(n + 1);
    if (!s) abort();
    memcpy(s, p->s + start, n);
    s[n] = '\0';
    wop_json_t *v = new_value(WOP_JSON_NUMBER);
    v->number = strtod(s, NULL);
    if (s != tmp) free(s);
    return v;
}

static int literal(parser_t *p, const char *word) {
    size_t n = strlen(word);
    if (p->pos + n > p->len || memcmp(p->s + p->pos, word, n) != 0) return 0;
    p->pos += n;
    return 1;
}

static wop_json_t *parse_value(parser_t *p) {
    skip_ws(p);
    if (p->pos >= p->len) return NULL;
    size_t start = p->pos;
    wop_json_t *v = NULL;
    char c = p->s[p->pos];
    if (c == '{' || c == '[') {
        v = parse_container(p, c == '{');
    } else if (c == '"') {
        size_t n;
        char *s = parse_string(p, &n);
        if (s) {
            v = new_value(WOP_JSON_STRING);
            v->string = s;
            v->string_len = n;
        }
    } else if (c == 't' || c == 'f') {
        if (literal(p, c == 't' ? "true" : "false")) {
            v = new_value(WOP_JSON_BOOL);
            v->boolean = c == 't';
        }
    } else if (c == 'n') {
        if (literal(p, "null")) v = new_value(WOP_JSON_NULL);
    } else {
        v = parse_number(p);
    }
    if (v) {
        v->raw = p->s + start;
        v->raw_len = p->pos - start;
    }
    return v;
}

wop_json_t *wop_json_parse(const char *text, size_t len) {
    parser_t p = {text, len, 0, 0};
    wop_json_t *v = parse_value(&p);
    if (!v) return NULL;
    skip_ws(&p);
    if (p.pos != p.len) {
        wop_json_free(v);
        return NULL;
    }
    return v;
}

void wop_json_free(wop_json_t *v) {
    if (!v) return;
    for (size_t i = 0; i < v->count; i++) {
        wop_json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

const wop_json_t *wop_json_get(const wop_json_t *obj, const char *key) {
    if (!obj || obj->kind != WOP_JSON_OBJECT) return NULL;
    /* The last duplicate wins, like most JSON parsers. */
    for (size_t i = obj->count; i-- > 0;) {
        if (strcmp(obj->keys[i], key) == 0) return obj->items[i];
    }
    return NULL;
}

const wop_json_t *wop_json_at(const wop_json_t *arr, size_t i) {
    if (!arr || arr->kind != WOP_JSON_ARRAY || i >= arr->count) return NULL;
    return arr->items[i];
}

const char *wop_json_string(const wop_json_t *v) {
    return v && v->kind == WOP_JSON_STRING ? v->string : NULL;
}

bool wop_json_is_null(const wop_json_t *v) { return v && v->kind == WOP_JSON_NULL; }

bool wop_json_is_true(const wop_json_t *v) { return v && v->kind == WOP_JSON_BOOL && v->boolean; }

char *wop_json_raw(const wop_json_t *v) {
    wop_buf_t b = {0};
    if (v) wop_buf_append(&b, v->raw, v->raw_len);
    else wop_buf_puts(&b, "null");
    return b.data;
}
