//! The required literals of each dangerous rule, in table order, read from the patterns
//! at development time (the `remembered_rule_literals_are_fresh` test writes this file).

use crate::rules::lazy_set::KnownLiterals;

pub(crate) const ANYWHERE: &[KnownLiterals] = &[
    KnownLiterals {
        fingerprint: 0xc869c08465ff405d,
        literals: Some(&["rm"]),
    },
    KnownLiterals {
        fingerprint: 0x725d5a45be2e7d73,
        literals: Some(&["rm"]),
    },
    KnownLiterals {
        fingerprint: 0x9a6837689f729e52,
        literals: Some(&["--recursive"]),
    },
    KnownLiterals {
        fingerprint: 0x7132a0e84e4a10fa,
        literals: Some(&["cmd"]),
    },
    KnownLiterals {
        fingerprint: 0x57c1166d57f5ac6e,
        literals: Some(&["powershell", "pwsh"]),
    },
    KnownLiterals {
        fingerprint: 0x7051fa519d71624f,
        literals: Some(&["powershell", "pwsh"]),
    },
    KnownLiterals {
        fingerprint: 0xde78fe8883305152,
        literals: Some(&["remove-item"]),
    },
    KnownLiterals {
        fingerprint: 0x996f79b39e217207,
        literals: Some(&["del", "erase", "rd", "rmdir"]),
    },
    KnownLiterals {
        fingerprint: 0xe814f8b61538bff4,
        literals: Some(&["iex", "invoke-expression"]),
    },
    KnownLiterals {
        fingerprint: 0x9d6a4b3cc7ebe1af,
        literals: Some(&["iex", "invoke-expression"]),
    },
    KnownLiterals {
        fingerprint: 0x856b30b6842ea712,
        literals: Some(&["taskkill"]),
    },
    KnownLiterals {
        fingerprint: 0x7db01651b080cc5c,
        literals: Some(&["stop-process"]),
    },
    KnownLiterals {
        fingerprint: 0xa15c0016ad65588b,
        literals: Some(&["format-volume"]),
    },
    KnownLiterals {
        fingerprint: 0xb66bfe2e2dba3ac8,
        literals: Some(&["clear-disk"]),
    },
    KnownLiterals {
        fingerprint: 0x68263965b492d3ed,
        literals: Some(&["diskpart"]),
    },
    KnownLiterals {
        fingerprint: 0xe3a95f238fe5ad90,
        literals: Some(&["format"]),
    },
    KnownLiterals {
        fingerprint: 0xdeafa79e905acdca,
        literals: Some(&["cipher"]),
    },
    KnownLiterals {
        fingerprint: 0xfbdf0f9a0a286a55,
        literals: Some(&["icacls"]),
    },
    KnownLiterals {
        fingerprint: 0x660febcd569e7cd3,
        literals: Some(&["icacls"]),
    },
    KnownLiterals {
        fingerprint: 0xecd8f4671b8f3bca,
        literals: Some(&["vssadmin"]),
    },
    KnownLiterals {
        fingerprint: 0x927733b71932c4bc,
        literals: Some(&["wbadmin"]),
    },
    KnownLiterals {
        fingerprint: 0x07cc930581077b1a,
        literals: Some(&["bcdedit"]),
    },
    KnownLiterals {
        fingerprint: 0x6b38c850013c3381,
        literals: Some(&["delete"]),
    },
    KnownLiterals {
        fingerprint: 0x321664aa0678d84b,
        literals: Some(&["remove-itemproperty"]),
    },
    KnownLiterals {
        fingerprint: 0x4610476df9f3d582,
        literals: Some(&["stop-service"]),
    },
    KnownLiterals {
        fingerprint: 0x02ac0ab50cb6c67b,
        literals: Some(&["stop", "delete"]),
    },
    KnownLiterals {
        fingerprint: 0x31f999569ef4bccf,
        literals: Some(&["users"]),
    },
    KnownLiterals {
        fingerprint: 0x59fe614dcdf3ea6d,
        literals: Some(&["appdata"]),
    },
    KnownLiterals {
        fingerprint: 0xc9b674331659c107,
        literals: Some(&["chmod"]),
    },
    KnownLiterals {
        fingerprint: 0xf23c14287b88a9cf,
        literals: Some(&["--recursive"]),
    },
    KnownLiterals {
        fingerprint: 0x1a30fd35e3825751,
        literals: Some(&["chown"]),
    },
    KnownLiterals {
        fingerprint: 0x50b6e7133fcdca23,
        literals: Some(&["--recur"]),
    },
    KnownLiterals {
        fingerprint: 0xeefb9824fc9a0925,
        literals: Some(&["/dev/"]),
    },
    KnownLiterals {
        fingerprint: 0x6cc9869d674bc7b1,
        literals: Some(&["table", "database"]),
    },
    KnownLiterals {
        fingerprint: 0xc735b063e3f5ff05,
        literals: Some(&["truncate"]),
    },
    KnownLiterals {
        fingerprint: 0xe7685aca427d4a1d,
        literals: Some(&["/etc/", "/private/"]),
    },
    KnownLiterals {
        fingerprint: 0xc982f4188e52c35c,
        literals: Some(&["systemctl"]),
    },
    KnownLiterals {
        fingerprint: 0x6e62ea6454562075,
        literals: Some(&["kill"]),
    },
    KnownLiterals {
        fingerprint: 0x59b13833cf50a80d,
        literals: Some(&["pkill"]),
    },
    KnownLiterals {
        fingerprint: 0x7b42ad820df30350,
        literals: Some(&["killall"]),
    },
    KnownLiterals {
        fingerprint: 0x49b4b44c11e07e3a,
        literals: Some(&["killall"]),
    },
    KnownLiterals {
        fingerprint: 0x7aeee220a52fa211,
        literals: Some(&["killall"]),
    },
    KnownLiterals {
        fingerprint: 0x9a6e4ef540f76c1f,
        literals: Some(&["curl", "wget"]),
    },
    KnownLiterals {
        fingerprint: 0x892073836de95831,
        literals: Some(&["curl", "wget"]),
    },
    KnownLiterals {
        fingerprint: 0x8479b13f8384178b,
        literals: Some(&["curl", "wget"]),
    },
    KnownLiterals {
        fingerprint: 0x0feab7c5c5ac87c1,
        literals: Some(&[
            "169.254.169.254",
            "100.100.100.200",
            "metadata.google.internal",
            "fd00:ec2::254",
        ]),
    },
    KnownLiterals {
        fingerprint: 0xd9952762d73002dc,
        literals: Some(&["base"]),
    },
    KnownLiterals {
        fingerprint: 0xf2041eba644cc454,
        literals: Some(&["xxd"]),
    },
    KnownLiterals {
        fingerprint: 0xc4a0304f34660162,
        literals: Some(&["echo"]),
    },
    KnownLiterals {
        fingerprint: 0xf810e3979c7e7dd0,
        literals: Some(&["openssl"]),
    },
    KnownLiterals {
        fingerprint: 0xea1f7e8f2f62c6e8,
        literals: Some(&[
            "/etc/",
            "/private/",
            "/dev/",
            "/.ssh",
            "/.hermes",
            "$hermes_home",
            "${hermes_home}",
            "bashrc",
            "zshrc",
            "profile",
            "bash_profile",
            "zprofile",
            "netrc",
            "pgpass",
            "npmrc",
            "pypirc",
        ]),
    },
    KnownLiterals {
        fingerprint: 0x1f313b8aefd405c7,
        literals: Some(&[
            "/etc/",
            "/private/",
            "/dev/",
            "/.ssh",
            "/.hermes",
            "$hermes_home",
            "${hermes_home}",
            "bashrc",
            "zshrc",
            "profile",
            "bash_profile",
            "zprofile",
            "netrc",
            "pgpass",
            "npmrc",
            "pypirc",
        ]),
    },
    KnownLiterals {
        fingerprint: 0xd56b470c49317d17,
        literals: Some(&[".env", "config.yaml"]),
    },
    KnownLiterals {
        fingerprint: 0x2a72f62ee4d5bb6c,
        literals: Some(&[".env", "config.yaml"]),
    },
    KnownLiterals {
        fingerprint: 0xb427e5b0574d4e88,
        literals: Some(&["xargs"]),
    },
    KnownLiterals {
        fingerprint: 0x211a5a8e60e62c36,
        literals: Some(&["-exec"]),
    },
    KnownLiterals {
        fingerprint: 0x4a7bfac84148d9bd,
        literals: Some(&["-delete"]),
    },
    KnownLiterals {
        fingerprint: 0xa78104f6bddb109f,
        literals: Some(&["gateway"]),
    },
    KnownLiterals {
        fingerprint: 0xc189215db76e486b,
        literals: Some(&["hermes"]),
    },
    KnownLiterals {
        fingerprint: 0x9865bbda16f25970,
        literals: Some(&["docker"]),
    },
    KnownLiterals {
        fingerprint: 0x32468aeeb4914874,
        literals: Some(&["docker"]),
    },
    KnownLiterals {
        fingerprint: 0x2061bc7363b71a72,
        literals: Some(&["context"]),
    },
    KnownLiterals {
        fingerprint: 0x432d825f70165cd7,
        literals: Some(&["podman"]),
    },
    KnownLiterals {
        fingerprint: 0x0090c1a22720f9a4,
        literals: Some(&["podman"]),
    },
    KnownLiterals {
        fingerprint: 0x8faf4b26803dae1b,
        literals: Some(&[
            "docker_host",
            "docker_context",
            "container_host",
            "container_connection",
        ]),
    },
    KnownLiterals {
        fingerprint: 0x028b8f2f38d4439a,
        literals: Some(&["compose", "-compose"]),
    },
    KnownLiterals {
        fingerprint: 0xb31210d81f705f93,
        literals: Some(&["docker"]),
    },
    KnownLiterals {
        fingerprint: 0x27e8abc656169b71,
        literals: Some(&["gateway"]),
    },
    KnownLiterals {
        fingerprint: 0x0d0a5564e39e7bec,
        literals: Some(&["gateway"]),
    },
    KnownLiterals {
        fingerprint: 0xb52eddb9bbaef2dc,
        literals: Some(&["hermes", "gateway", "cli.py"]),
    },
    KnownLiterals {
        fingerprint: 0xd6f07a52177ead71,
        literals: Some(&["pgrep", "pidof"]),
    },
    KnownLiterals {
        fingerprint: 0xb5829d9986b55479,
        literals: Some(&["pgrep", "pidof"]),
    },
    KnownLiterals {
        fingerprint: 0x31460bb58625b1b7,
        literals: Some(&["/etc/", "/private/"]),
    },
    KnownLiterals {
        fingerprint: 0x2ddcc00913336efa,
        literals: Some(&[".env", "config.yaml"]),
    },
    KnownLiterals {
        fingerprint: 0x0437d1d8ee3ace5f,
        literals: Some(&[
            "/etc/",
            "/private/",
            "/dev/",
            "/.ssh",
            "/.hermes",
            "$hermes_home",
            "${hermes_home}",
            "bashrc",
            "zshrc",
            "profile",
            "bash_profile",
            "zprofile",
            "netrc",
            "pgpass",
            "npmrc",
            "pypirc",
        ]),
    },
    KnownLiterals {
        fingerprint: 0x871ced3abfb01299,
        literals: Some(&[
            "/.ssh",
            "bashrc",
            "zshrc",
            "profile",
            "bash_profile",
            "zprofile",
            "netrc",
            "pgpass",
            "npmrc",
            "pypirc",
        ]),
    },
    KnownLiterals {
        fingerprint: 0x4c57c2a30dba13a2,
        literals: Some(&["--in-place"]),
    },
    KnownLiterals {
        fingerprint: 0x25d10a8c5992db13,
        literals: Some(&[
            "/.ssh",
            "bashrc",
            "zshrc",
            "profile",
            "bash_profile",
            "zprofile",
            "netrc",
            "pgpass",
            "npmrc",
            "pypirc",
        ]),
    },
    KnownLiterals {
        fingerprint: 0xed8311b5ded30389,
        literals: Some(&["/etc/", "/private/"]),
    },
    KnownLiterals {
        fingerprint: 0x9ca152970fc17a32,
        literals: Some(&["--in-place"]),
    },
    KnownLiterals {
        fingerprint: 0xb2b1a52cb3e2b490,
        literals: Some(&["/.hermes", "$hermes_home", "${hermes_home}"]),
    },
    KnownLiterals {
        fingerprint: 0xbefe530ac1a041cf,
        literals: Some(&["--in-place"]),
    },
    KnownLiterals {
        fingerprint: 0xc9e44fd9d87f8372,
        literals: Some(&["/.hermes", "$hermes_home", "${hermes_home}"]),
    },
    KnownLiterals {
        fingerprint: 0x4fda62fdb17a8d7e,
        literals: Some(&["<<"]),
    },
    KnownLiterals {
        fingerprint: 0x736bb0c77a50b919,
        literals: Some(&["reset"]),
    },
    KnownLiterals {
        fingerprint: 0xb1cfe2a528498d60,
        literals: Some(&["--forc"]),
    },
    KnownLiterals {
        fingerprint: 0x63d7e833e01a1f2b,
        literals: Some(&["push"]),
    },
    KnownLiterals {
        fingerprint: 0x14bb0d5d74acbbc5,
        literals: Some(&["clean"]),
    },
    KnownLiterals {
        fingerprint: 0xdf7177ea8bcdfaed,
        literals: Some(&["branch"]),
    },
    KnownLiterals {
        fingerprint: 0x729d9485a57b73d4,
        literals: Some(&["branch"]),
    },
    KnownLiterals {
        fingerprint: 0x6499bdd912dab36c,
        literals: Some(&["branch"]),
    },
    KnownLiterals {
        fingerprint: 0xc11e9bd029884d9c,
        literals: Some(&["chmod"]),
    },
];

pub(crate) const AT_EXECUTABLE: &[KnownLiterals] = &[
    KnownLiterals {
        fingerprint: 0x096fb783d1764576,
        literals: Some(&["mkfs"]),
    },
    KnownLiterals {
        fingerprint: 0x9907650cb9b4e45e,
        literals: Some(&["if="]),
    },
    KnownLiterals {
        fingerprint: 0xfbbd66f3de5fea9c,
        literals: Some(&["--remove-files", "--remove-source-files"]),
    },
    KnownLiterals {
        fingerprint: 0x3f24bcd788f80fb5,
        literals: Some(&[
            "destroy",
            "labelclear",
            "lvremove",
            "vgremove",
            "pvremove",
            "dmsetup",
        ]),
    },
    KnownLiterals {
        fingerprint: 0x7c3ca4d575018330,
        literals: Some(&[
            "tables",
            "tables-legacy",
            "tables-nft",
            "arptables",
            "ebtables",
            "flush",
            "delete",
            "disable",
            "reset",
            "firewall-cmd",
        ]),
    },
    KnownLiterals {
        fingerprint: 0xbd2f9c8cd3846319,
        literals: Some(&["crontab"]),
    },
    KnownLiterals {
        fingerprint: 0xf429770d5fedda70,
        literals: Some(&["crontab"]),
    },
    KnownLiterals {
        fingerprint: 0x48e9be3364969200,
        literals: Some(&["systemctl", "loginctl"]),
    },
    KnownLiterals {
        fingerprint: 0xacfa8f419c9116fa,
        literals: Some(&["loginctl"]),
    },
    KnownLiterals {
        fingerprint: 0x6986b53cf284b9e9,
        literals: Some(&["kexec"]),
    },
    KnownLiterals {
        fingerprint: 0xaee9897f3fa86984,
        literals: Some(&["sysctl"]),
    },
    KnownLiterals {
        fingerprint: 0x74cb478ae061980f,
        literals: Some(&["npm"]),
    },
    KnownLiterals {
        fingerprint: 0x1206b01fa1a49618,
        literals: Some(&["pnpm"]),
    },
    KnownLiterals {
        fingerprint: 0xa539f3cc2b63738d,
        literals: Some(&["uninstall", "remove"]),
    },
    KnownLiterals {
        fingerprint: 0x0112aff99c0b5b2b,
        literals: Some(&["uninstall"]),
    },
    KnownLiterals {
        fingerprint: 0x01dfadc3587e3564,
        literals: Some(&["brew"]),
    },
];
