pub fn repeat(s: &str, n: u32) -> String { s.repeat(n as usize) }
