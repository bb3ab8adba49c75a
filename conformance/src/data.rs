//! Test data that no layer can make cheap: pseudo-random letters (xorshift), the same for the
//! same seed in every process.

/// `len` pseudo-random lowercase letters from `seed`.
pub fn letters(len: usize, seed: u64) -> String {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

/// What the crash-kill child appends to half of its values to make them large (stored by
/// content): `|` and 48 KiB of letters, the same for every value, so their chunks are shared.
/// Which values get it: [`crash_value_is_large`].
pub fn large_suffix() -> &'static str {
    static SUFFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SUFFIX.get_or_init(|| format!("|{}", letters(48 * 1024, 7)))
}

/// Whether the crash-kill child stores the value tagged `r<run>-w<writer>-s<seq>` with
/// [`large_suffix`]: writer 0's even writes.
pub fn crash_value_is_large(tag: &str) -> bool {
    let seq = tag.rsplit_once("-s").and_then(|(_, seq)| seq.parse::<u64>().ok());
    tag.contains("-w0-") && seq.is_some_and(|seq| seq % 2 == 0)
}
