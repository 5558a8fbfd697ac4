//! Writing to stdout when the reader may go away: `wop run … | head -1`
//! closes the pipe after one line. The standard `println!` panics then
//! ("failed printing to stdout: Broken pipe"); here the process exits
//! quietly with 141 (128 + SIGPIPE, what a shell reports for a command a
//! closed pipe stopped). Every `println!` in this binary goes through
//! [`write`] (the macro in `main.rs`).

use std::io::{ErrorKind, Write as _};

/// Exit code when the reader closed stdout.
pub(crate) const CLOSED: i32 = 141;

/// Writes `args` to stdout; exits with [`CLOSED`] if the reader went away.
pub(crate) fn write(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(CLOSED);
        }
        eprintln!("wop: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}
