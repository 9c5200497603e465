//! The account `user:NAME`: its `/etc/passwd` entry (through NSS, `getent passwd`) and its
//! groups (`id -gn`, `id -Gn`), or `absent`.
//!
//! ```text
//! passwd=kwtest:x:1001:1001::/home/kwtest:/bin/sh
//! primary=kwtest
//! groups=kwtest adm
//! ```

use super::{kv_get, kv_lines, ok_stdout};
use kwin_engine::fact::{Fact, FactError, FactOutput};
use kwin_engine::quote::sh_quote;
use kwin_engine::transport::Shell;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserFact {
    pub name: String,
}

/// What the host knows of the account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserState {
    Absent,
    Present(Account),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub uid: u32,
    pub gid: u32,
    pub home: String,
    pub shell: String,
    /// The primary group's name.
    pub primary: String,
    /// The supplementary groups (every group `id -Gn` lists but the primary one), sorted.
    pub groups: Vec<String>,
}

impl Fact for UserFact {
    type Output = UserState;

    fn key(&self) -> String {
        format!("user:{}", self.name)
    }

    fn command(&self, _shell: Shell) -> String {
        format!(
            "n={}\n\
             if e=$(getent passwd \"$n\"); then\n\
             \x20 printf 'passwd=%s\\n' \"$e\"\n\
             \x20 printf 'primary=%s\\n' \"$(id -gn \"$n\")\"\n\
             \x20 printf 'groups=%s\\n' \"$(id -Gn \"$n\")\"\n\
             else\n\
             \x20 echo absent\n\
             fi </dev/null",
            sh_quote(&self.name)
        )
    }

    fn parse(&self, out: &FactOutput) -> Result<UserState, FactError> {
        let text = ok_stdout(out)?;
        if text.trim() == "absent" {
            return Ok(UserState::Absent);
        }
        let kv = kv_lines(text)?;
        let get =
            |k: &str| kv_get(&kv, k).ok_or_else(|| FactError::Parse(format!("no `{k}=` line")));
        let passwd = get("passwd")?;
        let f: Vec<&str> = passwd.split(':').collect();
        let [name, _, uid, gid, _, home, shell] = f.as_slice() else {
            return Err(FactError::Parse(format!(
                "`{}` is not a passwd entry (7 fields)",
                passwd.chars().take(200).collect::<String>()
            )));
        };
        if *name != self.name {
            return Err(FactError::Parse(format!(
                "the passwd entry is `{name}`'s, not `{}`'s",
                self.name
            )));
        }
        let num = |what: &str, v: &str| {
            v.parse::<u32>()
                .map_err(|_| FactError::Parse(format!("bad {what} `{v}`")))
        };
        let primary = get("primary")?.trim().to_string();
        let mut groups: Vec<String> = get("groups")?
            .split_whitespace()
            .filter(|g| *g != primary)
            .map(str::to_string)
            .collect();
        groups.sort();
        groups.dedup();
        Ok(UserState::Present(Account {
            uid: num("uid", uid)?,
            gid: num("gid", gid)?,
            home: home.to_string(),
            shell: shell.to_string(),
            primary,
            groups,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(stdout: &str) -> FactOutput {
        FactOutput {
            stdout: stdout.as_bytes().to_vec(),
            stderr: Vec::new(),
            exit: 0,
        }
    }

    fn fact() -> UserFact {
        UserFact {
            name: "nobody".into(),
        }
    }

    /// As Debian 12 answers for its `nobody` account, and for one that does not exist.
    #[test]
    fn parses_debian_12() {
        let st = fact().parse(&out(
            "passwd=nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\nprimary=nogroup\ngroups=nogroup\n",
        ));
        assert_eq!(
            st,
            Ok(UserState::Present(Account {
                uid: 65534,
                gid: 65534,
                home: "/nonexistent".into(),
                shell: "/usr/sbin/nologin".into(),
                primary: "nogroup".into(),
                groups: vec![],
            }))
        );
        assert_eq!(fact().parse(&out("absent\n")), Ok(UserState::Absent));
        let st = UserFact {
            name: "kwtest".into(),
        }
        .parse(&out(
            "passwd=kwtest:x:1001:1001::/home/kwtest:/bin/sh\nprimary=kwtest\ngroups=kwtest sudo adm\n",
        ));
        let Ok(UserState::Present(a)) = st else {
            panic!("{st:?}")
        };
        assert_eq!(a.groups, ["adm", "sudo"]);
    }

    #[test]
    fn garbage_is_an_error() {
        for bad in [
            "garbage",
            "passwd=nobody:x\nprimary=x\ngroups=x\n",
            "passwd=root:x:0:0:root:/root:/bin/bash\nprimary=root\ngroups=root\n",
            "passwd=nobody:x:a:0::/:/bin/sh\nprimary=x\ngroups=x\n",
            "passwd=nobody:x:1:1::/:/bin/sh\n",
        ] {
            assert!(fact().parse(&out(bad)).is_err(), "{bad}");
        }
    }
}
