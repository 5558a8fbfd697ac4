//! Bounding text before it goes into an event, an error or a log line: a
//! string a pack chose (a log line, an error code, a service name) is cut
//! to a byte cap on a char boundary, and says that it was cut.

/// Appended to a string cut at its cap.
pub const CUT_MARKER: &str = " …[truncated]";

/// Cuts `s` to at most `cap` bytes on a char boundary, adding the marker.
pub fn cut(s: &str, cap: usize) -> String {
    if s.len() <= cap {
        return s.to_owned();
    }
    let mut end = cap;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT_MARKER}", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::{CUT_MARKER, cut};

    #[test]
    fn cuts_on_a_char_boundary_with_the_marker() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), format!("abc{CUT_MARKER}"));
        assert_eq!(cut("ééé", 3), format!("é{CUT_MARKER}"));
    }
}
