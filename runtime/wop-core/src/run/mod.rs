//! One invocation, from admission to its outcome, the same for every pack
//! kind: whether it may start and with which limits ([`admission`]), its
//! replayable clock and randomness ([`replay`]), the bounded capture of
//! what it logs ([`logbuf`]), every way a sandbox stops as one protocol
//! code ([`classify`]) and what the pack returned as the node's outcome
//! ([`outcome`]).

pub mod admission;
pub mod classify;
pub mod logbuf;
pub mod outcome;
pub mod replay;
