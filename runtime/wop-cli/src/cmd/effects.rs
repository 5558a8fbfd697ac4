//! `wop effects`: list a run's effects, or resolve / purge effect records.

use crate::common::{Common, Failure, runtime, usage};
use clap::{Args, Subcommand};

/// `wop effects` arguments.
#[derive(Args)]
pub(crate) struct EffectsArgs {
    #[command(subcommand)]
    pub(crate) action: Option<EffectsAction>,
    /// The run whose effects to list.
    pub(crate) run_id: Option<String>,
    /// The run's tenant (as `wop run --tenant`; a run id names a run within
    /// a tenant).
    #[arg(long, default_value = "default")]
    pub(crate) tenant: String,
    #[command(flatten)]
    pub(crate) common: Common,
}

/// `wop effects` subcommands.
#[derive(Subcommand)]
pub(crate) enum EffectsAction {
    /// Resolve an effect whose outcome is unknown, after checking the provider.
    Resolve {
        /// The effect id (from `wop effects <runId>` or the error details).
        effect_id: String,
        /// What really happened: `completed` (it took effect) or `released`
        /// (it did not; a retry may perform it).
        #[arg(long = "as", value_parser = ["completed", "released"])]
        as_state: String,
        #[command(flatten)]
        common: Common,
    },
    /// Delete finished effect records, and usage records, older than the
    /// retention period (>= 14 days; `wop serve` does it hourly).
    Purge {
        #[command(flatten)]
        common: Common,
    },
}

pub(crate) async fn effects(a: EffectsArgs) -> Result<u8, Failure> {
    match a.action {
        Some(EffectsAction::Resolve {
            effect_id,
            as_state,
            common,
        }) => {
            let rt = runtime(&common)?;
            let to = if as_state == "completed" {
                wop_runtime::effects::EffectState::Completed
            } else {
                wop_runtime::effects::EffectState::Released
            };
            let r = rt.resolve_effect(&effect_id, to).await.map_err(usage)?;
            if common.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!("effect {} is now {:?}", r.effect_id, r.state);
            }
            Ok(0)
        }
        Some(EffectsAction::Purge { common }) => {
            let rt = runtime(&common)?;
            let n = rt.purge_effects().await?;
            println!("purged {n} finished effect record(s) past the retention period");
            let n = rt.purge_usage().await?;
            println!(
                "purged {n} usage record(s) and idle runs' roll-up(s) and ledger(s) past the retention period"
            );
            Ok(0)
        }
        None => {
            let run = a
                .run_id
                .ok_or_else(|| usage(anyhow::anyhow!("usage: wop effects <runId> | wop effects resolve <effectId> --as completed|released")))?;
            let rt = runtime(&a.common)?;
            let list = rt.effects(&a.tenant, &run).await?;
            if a.common.json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.is_empty() {
                println!("run {run} has no recorded effects");
            } else {
                println!(
                    "{:<44} {:<18} {:>7} {:<18} {:<10} at(ms)",
                    "effectId", "nodeId", "attempt", "keying", "state"
                );
                for e in list {
                    println!(
                        "{:<44} {:<18} {:>7} {:<18} {:<10} {}",
                        e.effect_id,
                        e.node_id,
                        e.attempt,
                        serde_json::to_value(e.keying)?.as_str().unwrap_or(""),
                        serde_json::to_value(e.state)?.as_str().unwrap_or(""),
                        e.at
                    );
                }
            }
            Ok(0)
        }
    }
}
