//! One module per `wop` command: its clap arguments and its handler.

pub(crate) mod capabilities;
pub(crate) mod demo;
pub(crate) mod effects;
pub(crate) mod inspect;
pub(crate) mod install;
pub(crate) mod new;
pub(crate) mod pack;
pub(crate) mod pack_tgz;
pub(crate) mod probe;
pub(crate) mod run;
pub(crate) mod secrets_view;
pub(crate) mod services_view;
pub(crate) mod tools;
pub(crate) mod trust;
pub(crate) mod usage;
