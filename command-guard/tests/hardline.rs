//! Reference §1.7 (hardline floor), its obfuscation vectors and §2.7 item 12.

mod common;

use common::{ctx_home, Report};

const H1: &str = "recursive delete of root filesystem";
const H2: &str = "recursive delete of system directory";
const H3: &str = "recursive delete of home directory";
const H4: &str = "format filesystem (mkfs)";
const H5: &str = "wipe raw block device";
const H6: &str = "dd to raw block device";
const H7: &str = "redirect to raw block device";
const H8: &str = "fork bomb";
const H9: &str = "kill all processes";
const H10: &str = "system shutdown/reboot";
const H11: &str = "init 0/6 (shutdown/reboot)";
const H12: &str = "systemctl poweroff/reboot";
const H13: &str = "telinit 0/6 (shutdown/reboot)";

#[test]
fn h1_root_delete() {
    let mut r = Report::default();
    for cmd in [
        "rm -rf /",
        "rm -rf /*",
        "sudo rm -rf /",
        "rm -rf \"/\"",
        "$(rm -rf /)",
        "rm -rf \\\n/",
        "rm -rf \\\r\n/",
        "ｒｍ -ｒｆ /",
        "/bin/rm -rf /",
        "nice rm -rf /",
        "command rm -rf /",
        "rm -rf //",
        "rm -rf /.",
        "rm -rf /./",
        "rm -rf /..",
        "rm -rf /../..",
        "rm -rf / *",
        "timeout 10 rm -rf /",
        "chroot /mnt rm -rf /",
        "sudo -u root env -C / FOO=1 busybox rm -rf /",
        "bash -lc 'rm -rf /'",
        "eval 'rm -rf /'",
        "env -S 'rm -rf /'",
        "echo `rm -rf /`",
        "(rm -rf /)",
        "{ rm -rf /; }",
        "r\\m -rf /",
        "r''m -rf /",
        "$'\\x72m' -rf /",
        "$(echo rm) -rf /",
    ] {
        r.hardline(cmd, H1);
    }
    r.dangerous("rm -rf /tmp/foo", "delete in root path");
    r.dangerous("rm -rf /.foo", "delete in root path");
    for cmd in [
        "git commit -m \"rm -rf /\"",
        "gh pr create --title \"block rm -rf / spellings\"",
        "echo \"rm -rf /\"",
        "printf \"%s\" \"rm -rf /\"",
        "echo '{ rm -rf /; }'",
        "git commit -m \"docs:\nwarn about rm -rf / in the guide\"",
    ] {
        r.not_floor(cmd);
    }
    r.finish();
}

#[test]
fn h2_h3_system_and_home_deletes() {
    let mut r = Report::default();
    for cmd in [
        "rm -rf /home",
        "rm -rf /etc",
        "rm -rf /usr",
        "rm -rf \"/etc\"",
        "rm -rf /var/*",
        "rm -rf /boot/",
    ] {
        r.hardline(cmd, H2);
    }
    r.dangerous("rm -rf /home/user/scratch", "delete in root path");
    r.not_floor("git commit -m \"wipe with rm -rf /etc\"");
    for cmd in [
        "rm -rf ~",
        "rm -rf $HOME",
        "rm -rf \"$HOME\"",
        "rm -rf ${HOME}",
        "rm -rf \\\n~",
        "rm -rf ~/",
        "rm -rf ~/*",
    ] {
        r.hardline(cmd, H3);
    }
    r.hardline_in(&ctx_home("/home/alice"), "rm -rf /home/alice", H3);
    r.dangerous("rm -rf ~/Downloads/old", "recursive delete");
    r.finish();
}

#[test]
fn h4_to_h6_disks() {
    let mut r = Report::default();
    for cmd in [
        "mkfs.ext4 /dev/sda1",
        "mkfs /dev/sdb",
        "sudo mkfs.ext4 /dev/sda1",
        "bash -c \"mkfs.ext4 /dev/sda1\"",
        "mkfs.ext4 \\\n/dev/sda1",
        "mkfs.ext4 /dev/sda",
        "mke2fs /dev/sdb1",
        "mkswap /dev/sdb2",
        "newfs_apfs /dev/disk2s1",
        "diskutil eraseDisk APFS X disk2",
        "diskutil apfs eraseVolume disk3s1",
    ] {
        r.hardline(cmd, H4);
    }
    r.safe("mkfs_helper --version");
    r.safe("if command -v mkfs >/dev/null; then echo ok; fi");
    r.safe("mkswap /swapfile");
    for cmd in [
        "wipefs -a /dev/sdb",
        "sgdisk -Z /dev/nvme0n1",
        "/usr/sbin/wipefs -a /dev/sda",
        "nice blkdiscard /dev/sda",
        "busybox wipefs -a /dev/sda",
        "toybox shred /dev/sda",
        "/bin/busybox blkdiscard /dev/mmcblk0",
        "shred -n 3 /dev/disk/by-id/ata-X",
    ] {
        r.hardline(cmd, H5);
    }
    r.safe("wipefs /dev/sda");
    r.safe("wipefs -a -n /dev/sda");
    r.safe("shred -u ~/dev/sdk/token.json");
    for cmd in [
        "dd if=/dev/zero of=/dev/sda bs=1M",
        "$(dd if=/dev/zero of=/dev/sda)",
        "`dd if=/dev/zero of=/dev/sda`",
        "dd if=x \"of=/dev/nvme0n1\"",
    ] {
        r.hardline(cmd, H6);
    }
    r.dangerous("dd if=/dev/zero of=./image.bin", "disk copy");
    r.safe("git commit -m \"never run dd of=/dev/sda in prod\"");
    r.safe("echo \"dd if=/dev/zero of=/dev/sda wipes the disk\"");
    r.finish();
}

#[test]
fn h7_to_h13_redirects_bombs_power() {
    let mut r = Report::default();
    for cmd in [
        "echo bad > /dev/sda",
        "eval \"cat f > /dev/sda\"",
        "cat x > \"/dev/disk0\"",
        "cat img >> /dev/mapper/root",
    ] {
        r.hardline(cmd, H7);
    }
    r.safe("echo test > /dev/null");
    r.safe("ls /dev/sda");
    r.not_floor("echo \"cat file > /dev/sda destroys the disk\"");
    r.not_floor("git commit -m \"block > /dev/sda redirects\"");
    for cmd in [
        ":(){ :|:& };:",
        "sh -c \":(){ :|:& };:\"",
        "eval ':(){ :|:& };:'",
        ":()  {  : | :&  } ; :",
        "bomb(){ bomb|bomb& }; bomb",
    ] {
        r.hardline(cmd, H8);
    }
    r.safe("echo hello:world");
    r.not_floor("git commit -m \"document the fork bomb :(){ :|:& };: pattern\"");
    r.not_floor("echo ':(){ :|:& };: is a fork bomb'");
    for cmd in [
        "kill -1",
        "kill -9 -1",
        "bash -c \"kill -1\"",
        "sudo kill -9 -1",
    ] {
        r.hardline(cmd, H9);
    }
    r.safe("echo \"kill -1 sends SIGHUP to every process\"");
    for cmd in [
        "shutdown -h now",
        "reboot",
        "$(reboot)",
        "(reboot)",
        "echo hi\nsudo reboot",
        "hermes send -t telegram \"$(sudo reboot)\"",
        "nice reboot",
        "/sbin/poweroff",
        "sudo -u root halt",
        "ls && reboot",
        "true; `reboot`",
    ] {
        r.hardline(cmd, H10);
    }
    r.safe("grep 'shutdown' logs.txt");
    r.safe("echo \"(reboot)\"");
    r.safe("git commit -m 'ops notes:\nreboot the box after the deploy'");
    r.not_floor("python3 - <<'EOF'\nmsg = 'run sudo reboot later'\nprint(msg)\nEOF");
    r.safe("hermes send -t telegram \"status:\nsudo reboot happened at 3am\"");
    r.hardline("init 0", H11);
    r.hardline("(init 0)", H11);
    r.hardline("init 6", H11);
    r.safe("echo '# init 0 in comment'");
    r.hardline("systemctl poweroff", H12);
    r.hardline("systemctl reboot", H12);
    r.hardline("sudo systemctl --no-block kexec", H12);
    r.safe("systemctl status nginx");
    r.dangerous("systemctl restart nginx", "stop/restart system service");
    r.dangerous("systemctl stop nginx", "stop/restart system service");
    r.hardline("telinit 0", H13);
    r.finish();
}

#[test]
fn terminal_and_unicode_obfuscation_stays_on_the_floor() {
    let mut r = Report::default();
    for cmd in [
        "\x1b[31mrm\x1b[0m -rf /",
        "\x1b]0;title\x07rm -rf /",
        "\u{9b}31mrm\u{9b}0m -rf /",
        "r\x00m -rf /",
        "\x1b[1mｒｍ\x1b[0m -rf /",
        "rm -rf ／",
        "rm${IFS}-rf${IFS}/",
        "rm$IFS-rf$IFS/",
        "rm${IFS:0:1}-rf /",
    ] {
        r.hardline(cmd, H1);
    }
    r.finish();
}

#[test]
fn yolo_examples_stay_hardline() {
    // §2.7 item 12: the H examples plus these stay hardline whatever the mode.
    let mut r = Report::default();
    r.hardline("rm -rf \"$HOME\"", H3);
    r.hardline("mkfs.ext4 /dev/sda", H4);
    r.hardline("rm -rf /", H1);
    r.hardline(":(){ :|:& };:", H8);
    r.finish();
}

/// Bash evaluates an array subscript whenever a value is used as a number, and the
/// subscript's substitution runs then, even from a value that was written in quotes.
#[test]
fn a_substitution_in_a_subscript_runs_wherever_the_value_lands() {
    let mut r = Report::default();
    for cmd in [
        "x='a[$(reboot)]'; echo $((x))",
        "x='a[`reboot`]'; (( x ))",
        "export n=\"a[\\$(reboot)]\"",
        "declare -i n; n='b[$(reboot)]'",
        "echo $((a[$(reboot)]))",
        "echo $(( $(reboot) + 1 ))",
        "cat <<EOF\n$((1 + $(reboot)))\nEOF",
    ] {
        r.hardline(cmd, H10);
    }
    r.finish();
}
