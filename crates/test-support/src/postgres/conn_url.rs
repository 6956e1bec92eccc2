//! A `postgres://` URL taken apart, as much as creating databases and
//! running `psql` without a password on the command line need.

/// A `postgres://` URL taken apart, as much as creating databases needs.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct ConnUrl {
    /// `postgres` or `postgresql`.
    scheme: String,
    /// As written (percent-encoded).
    user: Option<String>,
    /// As written, percent-encoded.
    password_raw: Option<String>,
    /// Decoded, for `PGPASSWORD`.
    pub(super) password: Option<String>,
    /// `host`, `host:port`, `[::1]:port`…
    host_port: String,
    /// The database as written, or empty (the server's default).
    database: String,
    /// `?…` with its `?`, or empty.
    query: String,
}

impl ConnUrl {
    pub(super) fn parse(url: &str) -> Result<Self, String> {
        let (scheme, rest) = url
            .split_once("://")
            .filter(|(s, _)| *s == "postgres" || *s == "postgresql")
            .ok_or("not a postgres:// URL")?;
        let (rest, query) = match rest.find('?') {
            Some(i) => (&rest[..i], rest[i..].to_owned()),
            None => (rest, String::new()),
        };
        let (authority, database) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, host_port) = match authority.rfind('@') {
            Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
            None => (None, authority),
        };
        if host_port.is_empty() {
            return Err("the URL names no host".into());
        }
        let (user, password_raw) = match userinfo {
            Some(info) => match info.split_once(':') {
                Some((user, password)) => (Some(user.to_owned()), Some(password.to_owned())),
                None => (Some(info.to_owned()), None),
            },
            None => (None, None),
        };
        let password = password_raw.as_deref().map(percent_decode).transpose()?;
        Ok(Self {
            scheme: scheme.to_owned(),
            user,
            password_raw,
            password,
            host_port: host_port.to_owned(),
            database: database.to_owned(),
            query,
        })
    }

    /// The URL of `database` on the same server, password included.
    pub(super) fn with_database(&self, database: &str) -> String {
        let mut userinfo = String::new();
        if let Some(user) = &self.user {
            userinfo.push_str(user);
            if let Some(password) = &self.password_raw {
                userinfo.push(':');
                userinfo.push_str(password);
            }
            userinfo.push('@');
        }
        format!(
            "{}://{userinfo}{}/{database}{}",
            self.scheme, self.host_port, self.query
        )
    }

    /// The URL as given but without the password (for a command line).
    pub(super) fn without_password(&self) -> String {
        let userinfo = self
            .user
            .as_ref()
            .map(|user| format!("{user}@"))
            .unwrap_or_default();
        let Self {
            scheme,
            host_port,
            database,
            query,
            ..
        } = self;
        format!("{scheme}://{userinfo}{host_port}/{database}{query}")
    }
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or("a bad %-escape in the password")?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the password is not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_taken_apart_and_rebuilt() {
        let url =
            ConnUrl::parse("postgresql://ci:p%40ss@db.example:5433/admin?sslmode=disable").unwrap();
        assert_eq!(url.password.as_deref(), Some("p@ss"));
        assert_eq!(
            url.without_password(),
            "postgresql://ci@db.example:5433/admin?sslmode=disable"
        );
        assert_eq!(
            url.with_database("lumen_t_1_0_abc"),
            "postgresql://ci:p%40ss@db.example:5433/lumen_t_1_0_abc?sslmode=disable"
        );
        let bare = ConnUrl::parse("postgres://db").unwrap();
        assert_eq!(bare.without_password(), "postgres://db/");
        assert_eq!(bare.with_database("x"), "postgres://db/x");
        assert!(ConnUrl::parse("mysql://db/x").is_err());
        assert!(ConnUrl::parse("postgres:///x").is_err());
        assert!(ConnUrl::parse("postgres://u:%zz@db/x").is_err());
    }
}
