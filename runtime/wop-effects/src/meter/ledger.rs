//! The run ledger: budget reservation and charging with compare-and-swap.

use super::{Meter, MeterError};
use serde_json::json;
use wop_core::budget::*;
use wop_core::events::Event;

/// Rounds of a ledger compare-and-swap before giving up with
/// [`MeterError::Contended`]. Every lost round means another executor's
/// update went in, so this only bounds pathological contention (sized for
/// a few hundred executors charging one run at once).
const MAX_CAS_ROUNDS: usize = 1024;

impl Meter {
    /// Reads the ledger of `tenant`'s run `run`.
    pub async fn ledger(&self, tenant: &str, run: &str) -> Result<Option<Ledger>, MeterError> {
        let k = crate::keys::ledger(tenant, run);
        match self.kv.get(&k).await? {
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|_| MeterError::Corrupt(k)),
            None => Ok(None),
        }
    }

    /// Applies `f` to the run's ledger with compare-and-swap; creates it
    /// (with `budget`, emitting `budget.reserved`) at the first call.
    pub(super) async fn update<R>(
        &self,
        tenant: &str,
        run: &str,
        budget: &RunBudget,
        mut f: impl FnMut(&mut Ledger, &mut Vec<Event>) -> R,
    ) -> Result<(Ledger, R, Vec<Event>), MeterError> {
        let k = crate::keys::ledger(tenant, run);
        let mut cur = self.kv.get(&k).await?;
        for _ in 0..MAX_CAS_ROUNDS {
            let mut events = Vec::new();
            let mut ledger = match &cur {
                Some(b) => serde_json::from_slice::<Ledger>(b)
                    .map_err(|_| MeterError::Corrupt(k.clone()))?,
                None => {
                    if !budget.is_empty() {
                        events.push(budget_event(
                            BudgetEvent::Reserved,
                            json!({"runId": run, "budget": budget}),
                        ));
                    }
                    Ledger::new(run, *budget)
                }
            };
            let before = ledger.clone();
            let r = f(&mut ledger, &mut events);
            if cur.is_some() && ledger == before {
                return Ok((ledger, r, events));
            }
            let bytes = serde_json::to_vec(&ledger).unwrap_or_default();
            match self
                .kv
                .compare_and_swap(&k, cur.as_deref(), Some(bytes))
                .await?
            {
                Ok(()) => return Ok((ledger, r, events)),
                Err(actual) => {
                    // Retry from the value that beat us.
                    cur = actual;
                    tokio::task::yield_now().await;
                }
            }
        }
        Err(MeterError::Contended(run.to_owned()))
    }

    /// Opens `tenant`'s run `run`'s ledger at an invocation's start
    /// (creating it and reserving the budget the first time). Returns the
    /// ledger and events. Another tenant's run of the same id is another
    /// ledger.
    ///
    /// A run with no budget and no run timeout needs no ledger: nothing is
    /// written for it (one durable write saved per new run).
    pub async fn open_run(
        &self,
        tenant: &str,
        run: &str,
        budget: &RunBudget,
        needs_clock: bool,
    ) -> Result<(Ledger, Vec<Event>), MeterError> {
        if budget.is_empty() && !needs_clock {
            if let Some(l) = self.ledger(tenant, run).await? {
                return Ok((l, Vec::new()));
            }
            return Ok((Ledger::new(run, *budget), Vec::new()));
        }
        let (l, (), ev) = self.update(tenant, run, budget, |_, _| ()).await?;
        Ok((l, ev))
    }

    /// Charges one performed tool call *before* it is performed: refused if
    /// it would exceed the run's tool-call or cost budget.
    pub async fn charge_tool_call(
        &self,
        tenant: &str,
        run: &str,
        node_id: &str,
        tool: &str,
    ) -> Result<(Vec<Event>, Result<(), Exhausted>), MeterError> {
        let price = self.prices.tool_call(tool);
        let (_, verdict, events) = self
            .update(tenant, run, &RunBudget::default(), |l, out| {
                let next_calls = l.consumed.tool_calls + 1;
                let next_cost = l.consumed.cost_usd + price;
                let over = if l.budget.max_tool_calls.is_some_and(|m| next_calls > m) {
                    Some((Dimension::ToolCalls, next_calls as f64))
                } else if l.budget.max_cost_usd.is_some_and(|m| next_cost > m) {
                    Some((Dimension::Cost, next_cost))
                } else {
                    None
                };
                if let Some((d, attempted)) = over {
                    l.exhaust(d, attempted, node_id, out);
                    return Err(Exhausted {
                        dimension: d,
                        limit: l.limit(d).unwrap_or(0.0),
                        attempted,
                    });
                }
                l.consumed.tool_calls = next_calls;
                l.consumed.cost_usd = next_cost;
                if !l.budget.is_empty() {
                    out.push(l.consumed_event());
                }
                l.cross_thresholds(out);
                Ok(())
            })
            .await?;
        Ok((events, verdict))
    }
}
