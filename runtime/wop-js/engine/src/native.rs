//! The native functions the prelude builds on (`globalThis.__wop` while the
//! prelude runs; the prelude captures and removes it). Each converts
//! between JavaScript values and one host import; none decides anything.
//! Bad arguments from JavaScript throw a `TypeError` (rquickjs converts).

use crate::openwop::node_pack::types::ErrorInfo;
use crate::openwop::node_pack::{clock, http, log, mcp, random, tools};
use hmac::{Hmac, Mac};
use rquickjs::function::Opt;
use rquickjs::{Ctx, Exception, Function, Object, Result, TypedArray, Value};
use sha2::Digest;

/// Copies the bytes of a `Uint8Array` (no JavaScript runs meanwhile).
fn bytes(arr: &TypedArray<'_, u8>) -> Result<Vec<u8>> {
    match arr.as_raw() {
        // SAFETY: the slice is copied at once; no JavaScript runs while it
        // is borrowed, so the engine cannot detach or resize the buffer.
        #[allow(unsafe_code)]
        Some(ptr) => Ok(unsafe { ptr.as_ref() }.to_vec()),
        None => Ok(Vec::new()),
    }
}

fn u8s<'js>(ctx: &Ctx<'js>, v: Vec<u8>) -> Result<Value<'js>> {
    Ok(TypedArray::<u8>::new(ctx.clone(), v)?.into_value())
}

fn error_object<'js>(ctx: &Ctx<'js>, e: &ErrorInfo, kind: Option<&str>) -> Result<Object<'js>> {
    let o = Object::new(ctx.clone())?;
    if let Some(k) = kind {
        o.set("kind", k)?;
    }
    o.set("code", e.code.as_str())?;
    o.set("message", e.message.as_str())?;
    if let Some(d) = &e.details {
        o.set("details", d.as_str())?;
    }
    Ok(o)
}

/// `{ok: json}` or `{err: {...}}`.
fn outcome<'js>(
    ctx: &Ctx<'js>,
    r: std::result::Result<String, (ErrorInfo, Option<&str>)>,
) -> Result<Object<'js>> {
    let o = Object::new(ctx.clone())?;
    match r {
        Ok(json) => o.set("ok", json)?,
        Err((e, kind)) => o.set("err", error_object(ctx, &e, kind)?)?,
    }
    Ok(o)
}

fn tool_error(e: tools::ToolError) -> (ErrorInfo, Option<&'static str>) {
    use tools::ToolError as T;
    match e {
        T::Forbidden(i) => (i, Some("forbidden")),
        T::NotFound(i) => (i, Some("not-found")),
        T::RateLimited(i) => (i, Some("rate-limited")),
        T::BudgetExhausted(i) => (i, Some("budget-exhausted")),
        T::Conflict(i) => (i, Some("conflict")),
        T::Failed(i) => (i, Some("failed")),
    }
}

fn level(n: i32) -> log::Level {
    match n {
        i32::MIN..=0 => log::Level::Debug,
        1 => log::Level::Info,
        2 => log::Level::Warn,
        _ => log::Level::Error,
    }
}

fn type_error(ctx: &Ctx<'_>, msg: &str) -> rquickjs::Error {
    Exception::throw_type(ctx, msg)
}

fn digest(ctx: &Ctx<'_>, alg: &str, data: &[u8]) -> Result<Vec<u8>> {
    Ok(match alg {
        "md5" => md5::Md5::digest(data).to_vec(),
        "sha1" => sha1::Sha1::digest(data).to_vec(),
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        "sha384" => sha2::Sha384::digest(data).to_vec(),
        "sha512" => sha2::Sha512::digest(data).to_vec(),
        other => {
            return Err(type_error(
                ctx,
                &format!(
                    "digest algorithm `{other}` is not supported (md5, sha1, sha256, sha384, sha512)"
                ),
            ));
        }
    })
}

fn hmac_of<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length, so this cannot fail.
    match <M as hmac::digest::KeyInit>::new_from_slice(key) {
        Ok(mut m) => {
            m.update(data);
            m.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

fn hmac(ctx: &Ctx<'_>, alg: &str, key: &[u8], data: &[u8]) -> Result<Vec<u8>> {
    Ok(match alg {
        "md5" => hmac_of::<Hmac<md5::Md5>>(key, data),
        "sha1" => hmac_of::<Hmac<sha1::Sha1>>(key, data),
        "sha256" => hmac_of::<Hmac<sha2::Sha256>>(key, data),
        "sha384" => hmac_of::<Hmac<sha2::Sha384>>(key, data),
        "sha512" => hmac_of::<Hmac<sha2::Sha512>>(key, data),
        other => {
            return Err(type_error(
                ctx,
                &format!(
                    "hmac algorithm `{other}` is not supported (md5, sha1, sha256, sha384, sha512)"
                ),
            ));
        }
    })
}

fn headers_of(arr: Option<rquickjs::Array<'_>>) -> Result<Vec<http::Header>> {
    let mut out = Vec::new();
    let Some(arr) = arr else { return Ok(out) };
    for pair in arr.iter::<rquickjs::Array>() {
        let pair: rquickjs::Array = pair?;
        let name: String = pair.get(0)?;
        let value: String = pair.get(1)?;
        out.push(http::Header { name, value });
    }
    Ok(out)
}

/// Builds the native object.
pub(crate) fn install<'js>(ctx: &Ctx<'js>) -> Result<Object<'js>> {
    let o = Object::new(ctx.clone())?;
    o.set(
        "log",
        Function::new(
            ctx.clone(),
            |lvl: i32, msg: String, fields: Opt<Option<String>>| {
                log::log(level(lvl), &msg, fields.0.flatten().as_deref());
            },
        )?,
    )?;
    o.set(
        "nowMs",
        Function::new(ctx.clone(), || clock::now_ms() as f64)?,
    )?;
    o.set(
        "randomBytes",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, n: u32| {
            u8s(&ctx, random::fill(n.min(65_536)))
        })?,
    )?;
    o.set(
        "toolCall",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, id: String, args: String, key: Opt<Option<String>>| {
                outcome(
                    &ctx,
                    tools::call(&id, &args, key.0.flatten().as_deref()).map_err(tool_error),
                )
            },
        )?,
    )?;
    o.set(
        "fetch",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>,
             method: String,
             url: String,
             headers: Opt<Option<rquickjs::Array<'js>>>,
             body: Opt<Option<TypedArray<'js, u8>>>,
             key: Opt<Option<String>>|
             -> Result<Object<'js>> {
                let body = match body.0.flatten() {
                    Some(b) => Some(bytes(&b)?),
                    None => None,
                };
                let req = http::Request {
                    method,
                    url,
                    headers: headers_of(headers.0.flatten())?,
                    body,
                    idempotency_key: key.0.flatten(),
                };
                let o = Object::new(ctx.clone())?;
                match http::safe_fetch(&req) {
                    Ok(resp) => {
                        o.set("status", resp.status)?;
                        let hs = rquickjs::Array::new(ctx.clone())?;
                        for (i, h) in resp.headers.into_iter().enumerate() {
                            let pair = rquickjs::Array::new(ctx.clone())?;
                            pair.set(0, h.name)?;
                            pair.set(1, h.value)?;
                            hs.set(i, pair)?;
                        }
                        o.set("headers", hs)?;
                        o.set("body", u8s(&ctx, resp.body)?)?;
                    }
                    Err(e) => o.set("err", error_object(&ctx, &e, None)?)?,
                }
                Ok(o)
            },
        )?,
    )?;
    o.set(
        "mcp",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>,
             op: String,
             server: String,
             a: Opt<Option<String>>,
             b: Opt<Option<String>>,
             key: Opt<Option<String>>|
             -> Result<Object<'js>> {
                let key = key.0.flatten();
                let a = a.0.flatten();
                let b = b.0.flatten();
                let r = match op.as_str() {
                    "call-tool" => mcp::call_tool(
                        &server,
                        a.as_deref().unwrap_or(""),
                        b.as_deref().unwrap_or("{}"),
                        key.as_deref(),
                    ),
                    "list-tools" => mcp::list_tools(&server, a.as_deref()),
                    "read-resource" => mcp::read_resource(&server, a.as_deref().unwrap_or("")),
                    "server-health" => mcp::server_health(&server),
                    other => {
                        return Err(type_error(
                            &ctx,
                            &format!("unknown mcp operation `{other}`"),
                        ));
                    }
                };
                outcome(&ctx, r.map_err(|e| (e, None)))
            },
        )?,
    )?;
    o.set(
        "digest",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, alg: String, data: TypedArray<'js, u8>| {
                let d = digest(&ctx, &alg, &bytes(&data)?)?;
                u8s(&ctx, d)
            },
        )?,
    )?;
    o.set(
        "hmac",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'js>, alg: String, key: TypedArray<'js, u8>, data: TypedArray<'js, u8>| {
                let d = hmac(&ctx, &alg, &bytes(&key)?, &bytes(&data)?)?;
                u8s(&ctx, d)
            },
        )?,
    )?;
    o.set(
        "utf8Encode",
        Function::new(ctx.clone(), |ctx: Ctx<'js>, s: String| {
            u8s(&ctx, s.into_bytes())
        })?,
    )?;
    o.set(
        "utf8Decode",
        Function::new(ctx.clone(), |data: TypedArray<'js, u8>| -> Result<String> {
            Ok(String::from_utf8_lossy(&bytes(&data)?).into_owned())
        })?,
    )?;
    Ok(o)
}
