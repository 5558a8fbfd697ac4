//! The files a pack author supplies, read before anything else looks at
//! them: one bounded reader for every pack file ([`packfile`]: regular
//! files only, capped before they are read) and the `.tgz` archives a
//! registry publishes ([`archive`]: hostile bytes, capped as they unpack).

pub mod archive;
pub mod packfile;
