//! JSON as the protocol signs and hashes it: the I-JSON rules a document
//! must keep to have one canonical form ([`ijson`], checked on the raw
//! bytes), and that canonical form with its hashes ([`jcs`], RFC 8785);
//! and the size limits count a value by ([`size`]).

pub mod ijson;
pub mod jcs;
pub mod size;
