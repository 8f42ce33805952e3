//! The command-line pieces both benches parse alike.

/// `--flag=value` as the flag and its inline value; any other argument as itself, no value.
pub(crate) fn split_flag(arg: &str) -> (String, Option<String>) {
    match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value.to_owned())),
        _ => (arg.to_owned(), None),
    }
}

/// `value` parsed as the number `flag` takes.
pub(crate) fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value.parse().map_err(|_| format!("{flag}: not a valid number: {value:?}"))
}
