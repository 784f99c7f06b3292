//! The sudo-stdin floor (reference §1.10, requirement R3) and the sudo option rules D102/D103.
//!
//! All three look only at sudo's *own* options, as located by the executable-position model, so
//! prose such as `grep 'sudo -S' README.md` is not a sudo invocation.

use crate::variants::Analysis;

pub(crate) const SUDO_STDIN: &str = "sudo password guessing via stdin (sudo -S)";

/// sudo's short options that take a value: the rest of their cluster is that value.
const SUDO_VALUE_LETTERS: &str = "ugpChDrtTUR";

/// Letters of a short-option cluster up to the first option that swallows the remainder.
fn cluster_flags(option: &str) -> Option<impl Iterator<Item = char> + '_> {
    let cluster = option
        .strip_prefix('-')
        .filter(|c| !c.is_empty() && !c.starts_with('-'))?;
    let mut done = false;
    Some(cluster.chars().take_while(move |&c| {
        if done {
            return false;
        }
        done = SUDO_VALUE_LETTERS.contains(c);
        !done
    }))
}

fn sudo_option_sets(analysis: &Analysis) -> impl Iterator<Item = &[String]> {
    analysis
        .commands()
        .flat_map(|c| c.wrappers.iter())
        .filter(|w| w.name == "sudo")
        .map(|w| w.options.as_slice())
}

pub(crate) fn reads_password_from_stdin(analysis: &Analysis) -> bool {
    sudo_option_sets(analysis).any(|options| {
        options.iter().any(|o| {
            o == "--stdin" || cluster_flags(o).is_some_and(|mut flags| flags.any(|c| c == 'S'))
        })
    })
}

/// D102: a privilege-relevant option written on its own.
pub(crate) fn has_privilege_flag(analysis: &Analysis) -> bool {
    sudo_option_sets(analysis).any(|options| {
        options.iter().any(|o| {
            matches!(o.as_str(), "-S" | "-s" | "-A" | "-a")
                || o.starts_with("--st")
                || o.starts_with("--a")
        })
    })
}

/// D103: the same letters hidden in a bundle such as `-nS` or `-sa`.
pub(crate) fn has_combined_privilege_flag(analysis: &Analysis) -> bool {
    sudo_option_sets(analysis).any(|options| {
        options.iter().any(|o| {
            cluster_flags(o).is_some_and(|flags| {
                let flags: Vec<char> = flags.collect();
                flags.len() > 1 && flags.iter().any(|c| matches!(c, 's' | 'S' | 'a' | 'A'))
            })
        })
    })
}
