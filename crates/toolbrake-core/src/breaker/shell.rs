//! Shell primitives (docs/decisions.md, "Shell and URL primitives"): the words of a
//! command (`words`: the tokenizer, the verb, volatile flags, the output sink) and its
//! canonical spelling (`spelling`). All pure: no DNS, no disk, no processes. This file only
//! re-exports its two children; neither imports it.

mod spelling;
mod words;

pub use spelling::*;
pub use words::*;

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The borrowing tokenizer reads every command as [`tokenize`] does.
        #[test]
        fn tokenize_cow_is_tokenize(c in "([a-z-]{1,4}|[ \\t'\"\\\\]|\u{a0}|\u{2003}|é){0,24}") {
            let cow: Vec<String> = tokenize_cow(&c).into_iter().map(|w| w.into_owned()).collect();
            proptest::prop_assert_eq!(cow, tokenize(&c));
        }

        /// Canonical spelling never panics, and is stable: the canonical form of a
        /// one-line command is its own canonical form.
        #[test]
        fn canonical_is_total_and_stable(c in "([a-z./=-]{1,4}|[ ;&|<>#'\"\\\\$()`{}*]|\n|é){0,24}") {
            let once = canonical(&c);
            let text = once.text();
            if !text.contains('\n') {
                proptest::prop_assert_eq!(canonical(&text).text(), text.clone(), "{:?}", c);
            }
        }
    }

    fn canon(c: &str) -> String {
        canonical(c).text()
    }

    #[test]
    fn canonical_spellings_of_one_command() {
        for (a, b) in [
            ("ls -la x", "ls -al x"),
            ("ls -la x", "ls -a -l x"),
            ("ls -la x", "ls -l -a x"),
            ("cat ./x", "cat x"),
            ("cat ./././x", "cat x"),
            ("python3 ./repro.py", "python3 repro.py"),
            ("pytest -x | head -50", "pytest -x | head -51"),
            ("pytest -x | head -n 50", "pytest -x | head -51"),
            ("pytest -x | tail -n50", "pytest -x | tail --lines=7"),
            ("python3 repro.py  # try 3", "python3 repro.py"),
            ("python3 repro.py # try 3\n", "python3 repro.py"),
            ("python3 repro.py;", "python3 repro.py"),
            ("python3 repro.py ;  ", "python3 repro.py"),
            ("python3   repro.py", "\tpython3 repro.py "),
            ("python3 'repro.py'", "python3 repro.py"),
            ("python3 \"repro.py\"", "python3 repro.py"),
            ("python3 re\\po.py", "python3 repo.py"),
            ("FOO=1 python3 repro.py", "python3 repro.py"),
            ("A=1 B=2 timeout 30 python3 repro.py", "python3 repro.py"),
            ("grep -rn foo src", "grep -n -r foo src"),
            ("a && b", "a&&b"),
            ("a | b", "a|b"),
            ("echo hi > out.txt", "echo hi >out.txt"),
            ("make 2>&1 | tail -5", "make 2>&1|tail -20"),
            ("ls \\\n  -la", "ls -al"),
            ("a ; ; b", "a; b"),
        ] {
            assert_eq!(canon(a), canon(b), "{a:?} and {b:?}");
        }
    }

    #[test]
    fn canonical_keeps_what_changes_the_command() {
        for (a, b) in [
            ("ls -la x", "ls -la y"),
            ("ls -l x", "ls -la x"),
            ("find . -name '*.py'", "find . -name *.py"),
            ("echo '$HOME'", "echo $HOME"),
            ("echo 'a b'", "echo a b"),
            ("grep 'a|b' f", "grep a|b f"),
            ("echo 'x # y'", "echo x"),
            ("a && b", "a || b"),
            ("a; b", "a & b"),
            ("cd /w && make", "make"),
            ("sed -n '1,50p' f", "sed -n '1,51p' f"),
            ("find . -type f -name x", "find . -name f -type x"),
            ("git commit -m 'a'", "git commit -m 'b'"),
            ("'FOO=1' cmd", "cmd"),
            ("cat ../x", "cat x"),
            // A script of several lines is kept as written.
            ("a; b", "a\nb"),
            ("edit 1:1\n# a comment, data to edit\nx", "edit 1:1\nx"),
            ("read x\n  indented data", "read x\nindented data"),
        ] {
            assert_ne!(canon(a), canon(b), "{a:?} and {b:?}");
        }
    }

    #[test]
    fn canonical_texts() {
        assert_eq!(canon("ls -la 'src dir'"), "ls -al src\\ dir");
        assert_eq!(
            canon("find . -name '*.py' | head -5"),
            "find . -name \\*.py | head -n#"
        );
        assert_eq!(canon("cd /w/ && ./run.sh -vx ; "), "cd /w && run.sh -vx");
        assert_eq!(canon("cd"), "cd ~");
        assert_eq!(canon("cd . && ls"), "ls");
        assert_eq!(canon("cd - && ls"), "cd - && ls");
        assert_eq!(
            canon("echo $(ls  -la) \"$HOME/x y\""),
            "echo $(ls  -la) $HOME/x\\ y"
        );
        assert_eq!(canon("cmd 2>/dev/null >> log"), "cmd 2>/dev/null >>log");
        assert_eq!(canon("cmd &> log &"), "cmd &>log &");
        assert_eq!(
            canon("python3  - <<'EOF'\nprint(1)  # keep\n  x = 2\nEOF\n"),
            "python3 - <<'\nprint(1)  # keep\n  x = 2"
        );
        assert_eq!(
            canon("cat <<-EOF | wc -l  # count\n\ta\n\tEOF"),
            "cat <<\n\ta | wc -l"
        );
        assert_eq!(canon("  a\n# b\n  "), "a\n# b");
        assert_eq!(canon("FOO=1"), "FOO=1");
        assert_eq!(canon("# only a comment"), "");
        assert_eq!(canon("tail -f log"), "tail -f log");
        assert_eq!(canon("ls -- -la"), "ls -- -la");
        assert_eq!(canon("ls 'unbalanced"), "ls unbalanced");
        assert_eq!(canon("é -la ü"), "é -al ü");
    }

    #[test]
    fn canonical_cd() {
        let c = canonical("cd '/w' && pytest");
        assert_eq!((c.cd.as_deref(), c.rest.as_str()), (Some("/w"), "pytest"));
        let c = canonical("cd ./src; make");
        assert_eq!((c.cd.as_deref(), c.rest.as_str()), (Some("src"), "make"));
        // Not a leading `cd DIR &&`: kept in the rest.
        for cmd in ["cd /w || exit", "cd /w | cat", "cd /w x", "make && cd /w"] {
            assert_eq!(canonical(cmd).cd, None, "{cmd}");
        }
    }

    #[test]
    fn tokenizer_edges() {
        assert_eq!(tokenize("a '' b"), ["a", "", "b"]);
        assert_eq!(tokenize(r#"a "x\"y" 'p\q'"#), ["a", "x\"y", "p\\q"]);
        assert_eq!(tokenize("a 'unbalanced b"), ["a", "unbalanced b"]);
        assert_eq!(tokenize("a\\ b c"), ["a b", "c"]);
        assert!(tokenize("   ").is_empty());
    }

    #[test]
    fn verbs() {
        assert_eq!(first_verb("sudo -u root -E /bin/LS -la"), "ls");
        assert_eq!(first_verb("env A=1 B=2 python3 x.py"), "python3");
        assert_eq!(
            first_verb("nice -n 5 timeout --foreground 10s wget x"),
            "wget"
        );
        assert_eq!(first_verb("A=1"), "");
        assert_eq!(first_verb(r"'C:\tools\Curl.exe' x"), "curl.exe");
    }

    #[test]
    fn volatile_flags_only_for_http_clients() {
        assert_eq!(
            strip_volatile_flags(
                "curl -fsSL --max-time 5 --retry=3 -m10 -A ua https://a.com/x && grep -f p f"
            ),
            "curl https://a.com/x && grep -f p f"
        );
        assert_eq!(
            strip_volatile_flags("FOO=1 timeout -s KILL 5 curl -k https://a"),
            "curl https://a"
        );
        assert_eq!(strip_volatile_flags("ls -s"), "ls -s");
    }

    #[test]
    fn sinks() {
        assert_eq!(
            sink_of(&tokenize("wget -O file.bin https://a")).as_deref(),
            Some("file.bin")
        );
        assert_eq!(sink_of(&tokenize("curl -O https://a")), None);
        assert_eq!(
            sink_of(&tokenize("curl --output=./x.json https://a")).as_deref(),
            Some("x.json")
        );
        assert_eq!(
            sink_of(&tokenize("echo hi >>log.txt")).as_deref(),
            Some("log.txt")
        );
        assert_eq!(sink_of(&tokenize("echo hi > | x")), None);
        assert_eq!(sink_of(&tokenize("cmd 2>/dev/null")), None);
    }
}
