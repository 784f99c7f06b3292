//! Random names and secrets from the kernel's random source, through the getrandom
//! crate: approval ids, temp-file names, command markers, bearer tokens.

use std::fmt::Write;

/// `digits` lowercase hex digits from the kernel's random source, or its error: for
/// secrets, which must not be guessable, so nothing weaker stands in for them.
pub fn try_random_hex(digits: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; digits.div_ceil(2)];
    getrandom::fill(&mut bytes).map_err(std::io::Error::from)?;
    Ok(hex(&bytes, digits))
}

/// `digits` lowercase hex digits from the kernel's random source; for names, which must
/// only not collide, so where that source is refused (a seccomp filter without
/// `getrandom` and no `/dev/urandom`), std's randomly keyed hasher over a counter and
/// the clock gives them instead.
pub fn random_hex(digits: usize) -> String {
    try_random_hex(digits).unwrap_or_else(|_| {
        use std::hash::BuildHasher;
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let mut bytes = Vec::with_capacity(digits.div_ceil(2) + 8);
        while bytes.len() * 2 < digits {
            let clock = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let word = std::collections::hash_map::RandomState::new().hash_one((
                COUNTER.fetch_add(1, Ordering::Relaxed),
                std::process::id(),
                clock,
            ));
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        hex(&bytes, digits)
    })
}

fn hex(bytes: &[u8], digits: usize) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out.truncate(digits);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_lowercase_hex_of_the_length_asked_and_differ() {
        for digits in [0, 1, 8, 13, 64] {
            let a = random_hex(digits);
            assert_eq!(a.len(), digits);
            assert!(a
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        }
        assert_ne!(random_hex(32), random_hex(32));
        assert_eq!(try_random_hex(64).unwrap().len(), 64);
    }
}
