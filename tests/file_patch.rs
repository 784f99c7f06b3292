//! The patch tool's editing engine through the binary: replace-mode matching,
//! V4A parsing and placement, replays, bounds, and the post-edit syntax checks.

mod file_patch_support;

use file_patch_support::{error_of, ok, Workspace};

// ------------------------------------------------------------------ replace mode

#[test]
fn replace_matches_within_a_line_across_runs_of_spaces() {
    let w = Workspace::new();
    w.put("a.py", "x = foo   bar baz\ny = 1\n");
    let v = w.replace("a.py", "foo bar", "foo qux");
    ok(&v);
    assert_eq!(w.get("a.py"), "x = foo   qux baz\ny = 1\n");
    assert_eq!(v["strategy"], "Loose", "{v}");
}

#[test]
fn replace_forgives_typography_and_keeps_the_files_characters() {
    let w = Workspace::new();
    let text = "title = \u{201c}Caf\u{e9} \u{2014} menu\u{201d}\nnote = it\u{2019}s 5\u{a0}\u{2212}\u{a0}3\u{2026}\nrange = 1\u{2013}9\n";
    w.put("t.txt", text);
    // The model types ASCII: straight quotes, hyphens, three dots, plain spaces.
    let v = w.replace(
        "t.txt",
        "title = \"Café - menu\"\nnote = it's 5 - 3...",
        "title = \"Café - carte\"\nnote = it's 5 - 3...",
    );
    ok(&v);
    assert_eq!(
        w.get("t.txt"),
        "title = \u{201c}Caf\u{e9} \u{2014} carte\u{201d}\nnote = it\u{2019}s 5\u{a0}\u{2212}\u{a0}3\u{2026}\nrange = 1\u{2013}9\n"
    );
    // And the other way round: typographic old_string against an ASCII file.
    w.put("u.txt", "a -- b\n");
    ok(&w.replace("u.txt", "a \u{2014} b", "a \u{2014} c"));
    assert_eq!(w.get("u.txt"), "a -- c\n");
}

#[test]
fn replace_keeps_an_ideographic_space() {
    let w = Workspace::new();
    w.put("j.txt", "名前\u{3000}山田\n年齢　30\n");
    let v = w.replace("j.txt", "名前 山田", "名前 田中");
    ok(&v);
    assert_eq!(w.get("j.txt"), "名前\u{3000}田中\n年齢　30\n");
}

#[test]
fn replace_refuses_a_whitespace_only_old_string() {
    let w = Workspace::new();
    w.put("w.txt", "a  b\n\n\tc\n");
    for old in [" ", "\n\n", " \t\n "] {
        let v = w.replace("w.txt", old, "x");
        assert_eq!(v["success"], false, "{v}");
        assert!(error_of(&v).contains("only whitespace"), "{v}");
    }
    assert_eq!(w.get("w.txt"), "a  b\n\n\tc\n");
}

#[test]
fn replace_turns_a_written_out_tab_into_a_tab_only_where_the_file_has_tabs() {
    let w = Workspace::new();
    w.put("m.go", "func main() {\n\tif ok {\n\t\trun()\n\t}\n}\n");
    ok(&w.replace("m.go", "\t\trun()", "\\t\\trun(1)"));
    assert_eq!(
        w.get("m.go"),
        "func main() {\n\tif ok {\n\t\trun(1)\n\t}\n}\n"
    );
    // A file that spells `\t` in its source keeps the spelling.
    w.put("s.py", "\tsep = \"\\t\"\n");
    ok(&w.replace("s.py", "sep = \"\\t\"", "sep = \"\\t\\t\""));
    assert_eq!(w.get("s.py"), "\tsep = \"\\t\\t\"\n");
    // A space-indented region gets the characters as written.
    w.put("p.txt", "  a\n");
    ok(&w.replace("p.txt", "  a", "  a\\tb"));
    assert_eq!(w.get("p.txt"), "  a\\tb\n");
}

#[test]
fn replace_by_anchored_block_and_close_lines() {
    let w = Workspace::new();
    let text = "def total(items):\n    result = 0\n    for item in items:\n        result += item.price\n    return result\n\nprint(total([]))\n";
    w.put("b.py", text);
    // First and last lines equal, the middle a little off.
    let v = w.replace(
        "b.py",
        "def total(items):\n    result = 0\n    for it in items:\n        result += it.price\n    return result",
        "def total(items):\n    return sum(item.price for item in items)",
    );
    ok(&v);
    assert_eq!(v["strategy"], "AnchoredBlock", "{v}");
    assert_eq!(
        w.get("b.py"),
        "def total(items):\n    return sum(item.price for item in items)\n\nprint(total([]))\n"
    );
    // Most lines close, the first one not.
    w.put(
        "c.py",
        "alpha = compute_alpha(1)\nbeta = compute_beta(2)\ngamma = compute_gamma(3)\ndelta = 4\n",
    );
    let v = w.replace(
        "c.py",
        "alpha = compute_alpha(10)\nbeta = compute_beta(2)\ngamma = compute_gamma(3)",
        "alpha = beta = gamma = 0",
    );
    ok(&v);
    assert_eq!(v["strategy"], "CloseLines", "{v}");
    assert_eq!(w.get("c.py"), "alpha = beta = gamma = 0\ndelta = 4\n");
}

#[test]
fn replace_refuses_when_similar_places_tie() {
    let w = Workspace::new();
    let block = "if ready:\n    start(1)\n    log('go')\nend()\n";
    let text = format!("{block}{block}");
    w.put("t.py", &text);
    let v = w.replace(
        "t.py",
        "if ready:\n    start(2)\n    log('go')\nend()",
        "pass",
    );
    assert_eq!(v["success"], false, "{v}");
    assert!(error_of(&v).contains("equally close"), "{v}");
    assert!(error_of(&v).contains("lines 1, 5"), "{v}");
    assert_eq!(w.get("t.py"), text);
}

#[test]
fn replace_replayed_edit_reports_already_applied() {
    let w = Workspace::new();
    w.put("r.rs", "fn main() {\n    let x = 1;\n}\n");
    ok(&w.replace("r.rs", "let x = 1;", "let x = 2;"));
    let again = w.replace("r.rs", "let x = 1;", "let x = 2;");
    ok(&again);
    assert_eq!(again["no_change"], true, "{again}");
    assert_eq!(again["already_applied"], true, "{again}");
    assert_eq!(w.get("r.rs"), "fn main() {\n    let x = 2;\n}\n");
    // Neither old nor new present: still an error.
    let v = w.replace("r.rs", "let y = 1;", "let y = 2;");
    assert_eq!(v["success"], false, "{v}");
}

#[test]
fn replace_with_a_90_kb_old_string() {
    let w = Workspace::new();
    let body: String = (0..3000)
        .map(|i| format!("    value_{i} = compute({i})\n"))
        .collect();
    let text = format!("def f():\n{body}    return 0\n");
    w.put("big.py", &text);
    let old = body.clone();
    assert!(old.len() > 90_000);
    let new = body.replace("compute(", "calc(");
    ok(&w.replace("big.py", &old, &new));
    assert_eq!(w.get("big.py"), format!("def f():\n{new}    return 0\n"));
    // The same size with every line a little off: refused or matched, but answered.
    let off: String = (0..3000)
        .map(|i| format!("value_{i} = compute({})\n", i + 1))
        .collect();
    let v = w.replace("big.py", &off, "x");
    assert_eq!(v["success"], false, "{v}");
    // Identical repeated lines (the worst case of a naive line search).
    let same = "    pass\n".repeat(10_000);
    w.put("rep.py", format!("{same}x\n"));
    let v = w.replace("rep.py", &format!("{}y\n", "    pass\n".repeat(9_000)), "z");
    assert_eq!(v["success"], false, "{v}");
}

// ------------------------------------------------------------------ V4A

#[test]
fn v4a_markers_padded_with_whitespace() {
    let w = Workspace::new();
    w.put("f.txt", "one\n");
    w.put("g.txt", "old\n");
    let v = w.v4a(" *** Begin Patch \n  *** Update File: f.txt\n@@\n-one\n+two\n\t*** Update File: g.txt \n-old\n+new\n *** End Patch \n");
    ok(&v);
    assert_eq!(w.get("f.txt"), "two\n");
    assert_eq!(w.get("g.txt"), "new\n");
}

#[test]
fn v4a_delete_then_add_of_the_same_path_rewrites_it() {
    let w = Workspace::new();
    w.put("cfg.txt", "a = 1\n");
    let v = w.v4a("*** Begin Patch\n*** Delete File: cfg.txt\n*** Add File: cfg.txt\n+a = 2\n+b = 3\n*** End Patch");
    ok(&v);
    assert_eq!(w.get("cfg.txt"), "a = 2\nb = 3\n");
    // Adding over a file that is not deleted first is still refused.
    let v = w.v4a("*** Begin Patch\n*** Add File: cfg.txt\n+other\n*** End Patch");
    assert!(error_of(&v).contains("already exists"), "{v}");
}

#[test]
fn v4a_hunks_without_an_anchor_line() {
    let w = Workspace::new();
    w.put("h.txt", "a\nb\nc\nd\ne\n");
    ok(&w.v4a("*** Begin Patch\n*** Update File: h.txt\n a\n-b\n+B\n c\n*** End Patch"));
    assert_eq!(w.get("h.txt"), "a\nB\nc\nd\ne\n");
}

#[test]
fn v4a_added_lines_follow_the_files_indentation() {
    let w = Workspace::new();
    w.put("i.py", "class A:\n    def f(self):\n        return 1\n");
    let v = w.v4a("*** Begin Patch\n*** Update File: i.py\n@@ class A:\n def f(self):\n-    return 1\n+    x = 2\n+    return x\n*** End Patch");
    ok(&v);
    assert_eq!(
        w.get("i.py"),
        "class A:\n    def f(self):\n        x = 2\n        return x\n"
    );
}

#[test]
fn v4a_ambiguous_context_is_refused() {
    let w = Workspace::new();
    let text = "fn a() {\n    x();\n}\nfn b() {\n    x();\n}\n";
    w.put("amb.rs", text);
    let v = w.v4a("*** Begin Patch\n*** Update File: amb.rs\n-    x();\n+    y();\n*** End Patch");
    assert_eq!(v["success"], false, "{v}");
    assert!(error_of(&v).contains("2 places (lines 2, 5)"), "{v}");
    assert_eq!(w.get("amb.rs"), text);
    // An anchor makes it unique.
    ok(&w.v4a("*** Begin Patch\n*** Update File: amb.rs\n@@ fn b() {\n-    x();\n+    y();\n*** End Patch"));
    assert_eq!(
        w.get("amb.rs"),
        "fn a() {\n    x();\n}\nfn b() {\n    y();\n}\n"
    );
}

#[test]
fn v4a_keeps_the_bytes_of_lines_it_does_not_touch() {
    let w = Workspace::new();
    // Mostly LF with two CRLF lines, and no newline at the end.
    w.put("mixed.txt", "one\ntwo\r\nthree\nfour\r\nfive");
    let v = w.v4a(
        "*** Begin Patch\n*** Update File: mixed.txt\n two\n-three\n+THREE\n four\n*** End Patch",
    );
    ok(&v);
    assert_eq!(w.get("mixed.txt"), "one\ntwo\r\nTHREE\nfour\r\nfive");
    assert!(
        v["diff"].as_str().unwrap().contains("-three\n+THREE\n"),
        "{v}"
    );
    // A CRLF file with a byte-order mark keeps both; the last line keeps its lack of a newline.
    w.put("win.txt", "\u{feff}a\r\nb\r\nc");
    ok(&w.v4a("*** Begin Patch\n*** Update File: win.txt\n-c\n+C\n+D\n*** End Patch"));
    assert_eq!(w.get("win.txt"), "\u{feff}a\r\nb\r\nC\r\nD");
}

/// The diff a whole-file `diff -u` gives, to hold the patch's own against.
fn whole_file_diff(old: &str, new: &str, name: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

#[test]
fn v4a_hunks_spread_over_a_large_file() {
    let w = Workspace::new();
    // 20 000 distinct lines, a few with CRLF breaks, no newline at the end.
    let lines: Vec<String> = (0..20_000)
        .map(|i| format!("    let value_{i:05} = compute({i});"))
        .collect();
    let mut text = String::new();
    for (i, line) in lines.iter().enumerate() {
        text.push_str(line);
        if i + 1 < lines.len() {
            text.push_str(if i % 1000 == 7 { "\r\n" } else { "\n" });
        }
    }
    w.put("big.rs", &text);
    let hunk = |at: usize, new: &str| -> String {
        format!(
            " {}\n {}\n-{}\n+{new}\n {}\n",
            lines[at - 2],
            lines[at - 1],
            lines[at],
            lines[at + 1]
        )
    };
    let patch = format!(
        "*** Begin Patch\n*** Update File: big.rs\n@@\n{}@@\n{}@@ let value_19990 =\n-{}\n-{}\n+    // the end\n*** End of File\n*** End Patch",
        hunk(1007, "    let renamed = compute(1007);"),
        hunk(12_000, "    let added = 1;\n+    let value_12000 = compute(12000);"),
        lines[19_998],
        lines[19_999],
    );
    let v = w.v4a(&patch);
    ok(&v);
    let expected = text
        .replace(
            &format!("{}\r\n", lines[1007]),
            "    let renamed = compute(1007);\n",
        )
        .replace(
            &format!("\n{}\n", lines[12_000]),
            &format!("\n    let added = 1;\n{}\n", lines[12_000]),
        )
        .replace(
            &format!("\n{}\n{}", lines[19_998], lines[19_999]),
            "\n    // the end",
        );
    assert_eq!(w.get("big.rs"), expected);
    assert_eq!(
        v["diff"].as_str().unwrap(),
        whole_file_diff(&text, &expected, "big.rs"),
        "{v}"
    );

    // A hunk after an anchor near the end, whose lines also occur before it.
    let repeated = format!("{expected}\nfn tail() {{\n    let value_00003 = compute(3);\n}}\n");
    w.put("big.rs", &repeated);
    let v = w.v4a("*** Begin Patch\n*** Update File: big.rs\n@@ fn tail() {\n-    let value_00003 = compute(3);\n+    let value_00003 = compute(4);\n*** End Patch");
    ok(&v);
    let after = repeated.replace(
        "tail() {\n    let value_00003 = compute(3);",
        "tail() {\n    let value_00003 = compute(4);",
    );
    assert_eq!(w.get("big.rs"), after);
    assert_eq!(
        v["diff"].as_str().unwrap(),
        whole_file_diff(&repeated, &after, "big.rs"),
        "{v}"
    );
    // Without an anchor, lines that occur once are found wherever they are.
    ok(&w.v4a("*** Begin Patch\n*** Update File: big.rs\n-    let value_00003 = compute(4);\n+    let value_00003 = compute(5);\n*** End Patch"));
    ok(&w.v4a("*** Begin Patch\n*** Update File: big.rs\n-    let value_00003 = compute(3);\n+    x\n*** End Patch"));
    let last = after
        .replace("value_00003 = compute(4)", "value_00003 = compute(5)")
        .replacen("    let value_00003 = compute(3);", "    x", 1);
    assert_eq!(w.get("big.rs"), last);
}

#[test]
fn v4a_lines_added_after_a_last_line_without_a_newline() {
    let w = Workspace::new();
    w.put("n.txt", "a\nb\nc");
    let v =
        w.v4a("*** Begin Patch\n*** Update File: n.txt\n c\n+d\n*** End of File\n*** End Patch");
    ok(&v);
    assert_eq!(w.get("n.txt"), "a\nb\nc\nd");
    assert_eq!(
        v["diff"].as_str().unwrap(),
        whole_file_diff("a\nb\nc", "a\nb\nc\nd", "n.txt"),
        "{v}"
    );
    let v = w.v4a("*** Begin Patch\n*** Update File: n.txt\n-a\n+A\n*** End Patch");
    ok(&v);
    assert_eq!(w.get("n.txt"), "A\nb\nc\nd");
    assert_eq!(
        v["diff"].as_str().unwrap(),
        whole_file_diff("a\nb\nc\nd", "A\nb\nc\nd", "n.txt"),
        "{v}"
    );
}

#[test]
fn v4a_ambiguity_names_every_place_in_a_large_file() {
    let w = Workspace::new();
    let block = "fn same() {\n    let total_of_everything = sum(values);\n}\n";
    let text: String = (0..500).map(|i| format!("// part {i}\n{block}")).collect();
    w.put("many.rs", &text);
    let v = w.v4a("*** Begin Patch\n*** Update File: many.rs\n-    let total_of_everything = sum(values);\n+    x\n*** End Patch");
    assert_eq!(v["success"], false, "{v}");
    assert!(error_of(&v).contains("500 places (lines 3, 7, 11,"), "{v}");
    assert_eq!(w.get("many.rs"), text);
    // An anchor picks the first place after it.
    ok(&w.v4a("*** Begin Patch\n*** Update File: many.rs\n@@ // part 250\n-    let total_of_everything = sum(values);\n+    x\n*** End Patch"));
    assert_eq!(
        w.get("many.rs"),
        text.replacen(
            &format!("// part 250\n{block}"),
            "// part 250\nfn same() {\n    x\n}\n",
            1
        )
    );
}

#[test]
fn v4a_replayed_patch_reports_already_applied() {
    let w = Workspace::new();
    w.put("p.txt", "alpha\nbeta\ngamma\n");
    let patch = "*** Begin Patch\n*** Update File: p.txt\n alpha\n-beta\n+BETA\n gamma\n*** Add File: q.txt\n+new\n*** End Patch";
    ok(&w.v4a(patch));
    let again = w.v4a(patch);
    ok(&again);
    assert_eq!(again["no_change"], true, "{again}");
    assert_eq!(again["already_applied"], true, "{again}");
    assert_eq!(w.get("p.txt"), "alpha\nBETA\ngamma\n");
    assert_eq!(w.get("q.txt"), "new\n");
}

// ------------------------------------------------------------------ syntax checks

#[test]
fn broken_json_yaml_toml_are_refused_and_left_unchanged() {
    let w = Workspace::new();
    let cases = [
        (
            "c.json",
            "{\"a\": 1, \"b\": [2, 3]}\n",
            "[2, 3]",
            "[2, 3",
            "[4, 3]",
        ),
        (
            "c.yaml",
            "a: 1\nlist: [2, 3]\n",
            "[2, 3]",
            "[2, 3",
            "[4, 3]",
        ),
        (
            "c.toml",
            "[server]\nport = 80\n",
            "[server]",
            "[server",
            "[service]",
        ),
    ];
    for (file, text, old, broken, fine) in cases {
        w.put(file, text);
        let v = w.replace(file, old, broken);
        assert_eq!(v["success"], false, "{file}: {v}");
        assert!(error_of(&v).starts_with("Refusing the edit"), "{file}: {v}");
        assert_eq!(v["lint"]["status"], "error", "{file}: {v}");
        assert_eq!(w.get(file), text, "{file}");
        // A valid edit goes through with `lint: ok`.
        let v = w.replace(file, old, fine);
        ok(&v);
        assert_eq!(v["lint"]["status"], "ok", "{file}: {v}");
    }
    // Through V4A as well: nothing of the patch is written.
    w.put("other.txt", "x\n");
    let v = w.v4a("*** Begin Patch\n*** Update File: other.txt\n-x\n+y\n*** Update File: c.json\n-{\"a\": 1, \"b\": [4, 3]}\n+{\"a\": 1,\n*** End Patch");
    assert_eq!(v["success"], false, "{v}");
    assert_eq!(w.get("other.txt"), "x\n");
}

#[test]
fn an_error_that_was_there_before_is_not_blamed_on_the_edit() {
    let w = Workspace::new();
    w.put("bad.json", "{\"a\": 1,\n\"b\": }\n");
    let v = w.replace("bad.json", "\"a\": 1", "\"a\": 2");
    ok(&v);
    assert_eq!(v["lint"]["status"], "error", "{v}");
    assert!(
        v["lint"]["note"]
            .as_str()
            .unwrap()
            .contains("before this edit"),
        "{v}"
    );
    assert_eq!(w.get("bad.json"), "{\"a\": 2,\n\"b\": }\n");
}

#[test]
fn python_syntax_errors_are_reported_and_the_file_written() {
    let w = Workspace::new();
    w.put("m.py", "def f():\n    return 1\n");
    let v = w.replace("m.py", "return 1", "return (1");
    ok(&v);
    assert_eq!(v["lint"]["status"], "error", "{v}");
    assert!(
        v["lint"]["output"]
            .as_str()
            .unwrap()
            .contains("SyntaxError"),
        "{v}"
    );
    assert_eq!(w.get("m.py"), "def f():\n    return (1\n");
    let v = w.replace("m.py", "return (1", "return 1");
    assert_eq!(v["lint"]["status"], "ok", "{v}");
    // Compile errors beyond the grammar count too, as py_compile's would.
    w.put("n.py", "x = 1\n");
    let v = w.replace("n.py", "x = 1", "return 1");
    assert_eq!(v["lint"]["status"], "error", "{v}");
}

#[test]
fn python_check_without_an_interpreter_says_so() {
    let mut w = Workspace::new();
    let empty = tempfile::TempDir::new().unwrap();
    w.path_env = Some(empty.path().to_string_lossy().into_owned());
    w.put("m.py", "x = 1\n");
    let v = w.replace("m.py", "x = 1", "x = (");
    ok(&v);
    assert_eq!(v["lint"]["status"], "skipped", "{v}");
    assert!(
        v["lint"]["output"].as_str().unwrap().contains("no python3"),
        "{v}"
    );
}

#[test]
fn each_check_can_be_switched_off_in_config() {
    let w = Workspace::new();
    w.config("syntax_check:\n  json: false\n  python: false\n");
    w.put("c.json", "{\"a\": 1}\n");
    let v = w.replace("c.json", "1}", "1");
    ok(&v);
    assert!(v.get("lint").is_none(), "{v}");
    w.put("m.py", "x = 1\n");
    let v = w.replace("m.py", "x = 1", "x = (");
    assert!(v.get("lint").is_none(), "{v}");
    // YAML is still checked.
    w.put("c.yaml", "a: [1]\n");
    let v = w.replace("c.yaml", "[1]", "[1");
    assert_eq!(v["success"], false, "{v}");
}

#[test]
fn write_file_gets_the_same_checks() {
    let w = Workspace::new();
    let v = w.call(
        "write_file",
        serde_json::json!({"path": "new.json", "content": "{\"a\": "}),
    );
    assert!(error_of(&v).contains("not created"), "{v}");
    assert!(!w.path("new.json").exists());
    let v = w.call(
        "write_file",
        serde_json::json!({"path": "new.json", "content": "{\"a\": 1}\n"}),
    );
    assert_eq!(v["lint"]["status"], "ok", "{v}");
    let v = w.call(
        "write_file",
        serde_json::json!({"path": "s.py", "content": "def f(:\n"}),
    );
    assert_eq!(v["lint"]["status"], "error", "{v}");
    assert_eq!(w.get("s.py"), "def f(:\n");
}
