//! Text written by members (names, the last-error annotation of their heartbeat) printed to a
//! terminal: a control character in it could move the cursor, rewrite earlier lines or change
//! the terminal's settings, so every one is shown escaped instead.

/// `text` with every control character (C0, DEL, C1) and the Unicode line and paragraph
/// separators written as a Rust escape (`\n`, `\u{1b}`), and backslashes doubled so the
/// escapes cannot be faked.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                out.extend(c.escape_default());
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("plain c2"), "plain c2");
        assert_eq!(printable("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(printable("\u{1b}[2J"), "\\u{1b}[2J");
        assert_eq!(printable("\u{9b}"), "\\u{9b}");
        assert_eq!(printable("a\\nb"), "a\\\\nb");
        assert_eq!(printable("ünï"), "ünï");
    }

    proptest! {
        #[test]
        fn nothing_printed_is_a_control_character(text in any::<String>()) {
            let separator = |c: char| matches!(c, '\u{2028}' | '\u{2029}');
            prop_assert!(!printable(&text).chars().any(|c| c.is_control() || separator(c)));
        }
    }
}
