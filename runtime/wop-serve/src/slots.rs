//! Invocation slots: `maxInFlight` in all, and at most
//! `maxInFlightPerTenant` of them held by one tenant, so that one tenant
//! sending slow invocations as fast as it can cannot take every slot and
//! leave the others with `503` (decision 0048).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Listings (a run's effects, usage) read at once, in all: each reads at
/// most a page (8 MiB of records plus one), so these bound what listings
/// hold together, apart from the invocation slots (decision 0052).
pub(crate) const LISTINGS: usize = 16;
/// Listings one tenant reads at once.
pub(crate) const LISTINGS_PER_TENANT: usize = 4;

/// The server's invocation slots (and, apart, its listing slots).
pub(crate) struct Slots {
    all: Arc<Semaphore>,
    per_tenant: usize,
    /// Tenant → its invocations running now (absent: none).
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// Why no slot was given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Every slot is taken.
    Full,
    /// The tenant holds its share: the cap.
    Tenant(usize),
}

/// One running invocation's slot; given back when dropped.
pub(crate) struct Slot {
    _all: OwnedSemaphorePermit,
    tenant: String,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                held.remove(&self.tenant);
            }
        }
    }
}

impl Slots {
    /// `all` slots, at most `per_tenant` of them per tenant.
    pub(crate) fn new(all: Arc<Semaphore>, per_tenant: usize) -> Self {
        Slots {
            all,
            per_tenant,
            held: Arc::default(),
        }
    }

    /// The per-tenant cap.
    pub(crate) fn per_tenant(&self) -> usize {
        self.per_tenant
    }

    /// A slot for one of `tenant`'s invocations: [`Refused::Full`] when
    /// every slot is taken, else [`Refused::Tenant`] when the tenant holds
    /// its share.
    pub(crate) fn admit(&self, tenant: &str) -> Result<Slot, Refused> {
        let all = self.all.clone().try_acquire_owned();
        let all = all.map_err(|_| Refused::Full)?;
        // Checked and counted under one lock, so two requests of one
        // tenant cannot both pass its last slot.
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let n = held.get(tenant).copied().unwrap_or(0);
        if n >= self.per_tenant {
            return Err(Refused::Tenant(self.per_tenant));
        }
        held.insert(tenant.to_owned(), n + 1);
        Ok(Slot {
            _all: all,
            tenant: tenant.to_owned(),
            held: self.held.clone(),
        })
    }

    /// Tenants with an invocation running now (for tests and `/healthz`).
    pub(crate) fn tenants_in_flight(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_holds_at_most_its_share_and_gets_it_back() {
        let slots = Slots::new(Arc::new(Semaphore::new(4)), 2);
        let a1 = slots.admit("a").unwrap();
        let _a2 = slots.admit("a").unwrap();
        assert_eq!(slots.admit("a").err(), Some(Refused::Tenant(2)));
        let _b1 = slots.admit("b").unwrap();
        let _b2 = slots.admit("b").unwrap();
        assert_eq!(slots.admit("c").err(), Some(Refused::Full));
        drop(a1);
        let _a3 = slots.admit("a").unwrap();
        assert_eq!(slots.tenants_in_flight(), 2);
    }

    #[test]
    fn refusals_give_back_what_they_took() {
        let sem = Arc::new(Semaphore::new(2));
        let slots = Slots::new(sem.clone(), 1);
        let b = slots.admit("b").unwrap();
        // The tenant's refusal gives the server's slot back.
        assert_eq!(slots.admit("b").err(), Some(Refused::Tenant(1)));
        assert_eq!(sem.available_permits(), 1);
        let a = slots.admit("a").unwrap();
        // Full first: the server's answer when both hold.
        assert_eq!(slots.admit("b").err(), Some(Refused::Full));
        drop((a, b));
        assert_eq!(slots.tenants_in_flight(), 0);
        assert_eq!(sem.available_permits(), 2);
    }
}
