//! `wop usage`: usage and cost, rolled up per run and per pack.

use crate::common::{Common, Failure, runtime};
use clap::Args;
use wop_runtime::metering::UsageScope;

/// `wop usage` arguments.
#[derive(Args)]
pub(crate) struct UsageArgs {
    /// Only this run (of `--tenant`'s).
    #[arg(long)]
    pub(crate) run: Option<String>,
    /// Only this tenant's runs (with `--run`: default `default`, as `wop
    /// run`'s). Without either: every tenant, runs shown as `tenant/run`.
    #[arg(long)]
    pub(crate) tenant: Option<String>,
    /// Only this pack (name).
    #[arg(long)]
    pub(crate) pack: Option<String>,
    /// Also list every invocation record.
    #[arg(long)]
    pub(crate) records: bool,
    #[command(flatten)]
    pub(crate) common: Common,
}

pub(crate) async fn usage(a: UsageArgs) -> Result<u8, Failure> {
    let rt = runtime(&a.common)?;
    let scope = match (a.tenant.as_deref(), a.run.as_deref()) {
        (t, Some(run)) => UsageScope::Run {
            tenant: t.unwrap_or("default"),
            run,
        },
        (Some(t), None) => UsageScope::Tenant(t),
        (None, None) => UsageScope::All,
    };
    let (by_run, by_pack) = rt.usage_rollup(scope, a.pack.as_deref()).await?;
    if a.common.json {
        let mut doc = serde_json::json!({"byRun": by_run, "byPack": by_pack});
        if a.records {
            doc["records"] = serde_json::to_value(rt.usage(scope, a.pack.as_deref()).await?)?;
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(0);
    }
    if by_run.is_empty() {
        println!(
            "no usage recorded{}",
            a.run.map(|r| format!(" for run {r}")).unwrap_or_default()
        );
        return Ok(0);
    }
    for (title, map) in [("by run", &by_run), ("by pack", &by_pack)] {
        println!("{title}");
        println!(
            "  {:<28} {:>6} {:>14} {:>10} {:>6} {:>12}",
            "", "calls", "fuel", "wall ms", "tools", "cost"
        );
        for (k, r) in map.iter() {
            println!(
                "  {:<28} {:>6} {:>14} {:>10.1} {:>6} {:>8.6} {}",
                k,
                r.invocations,
                r.fuel,
                r.wall_time_us as f64 / 1000.0,
                r.tool_calls,
                r.cost,
                r.currency
            );
        }
    }
    if a.records {
        for u in rt.usage(scope, a.pack.as_deref()).await? {
            println!("{}", serde_json::to_string(&u)?);
        }
    }
    Ok(0)
}
