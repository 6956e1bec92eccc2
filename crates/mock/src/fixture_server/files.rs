//! Mapping a request path onto a file below the root: decoding, traversal
//! checks, content types and the download header.

use std::path::{Component, Path, PathBuf};

/// A request path that names something below the root.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct RelativePath {
    /// Decoded segments joined with the platform separator; empty for `/`.
    pub(super) path: PathBuf,
    /// Whether the request path ended in `/`, so a folder needs no redirect.
    pub(super) trailing_slash: bool,
}

/// Decodes `raw` (the path part of a request target, still percent-encoded)
/// into a path relative to the root.
///
/// Returns `None` for anything that could step outside the root or that we
/// cannot map to a file name safely: a `..` segment in any encoding, an
/// encoded `/` or `\`, a NUL byte, invalid percent escapes or invalid UTF-8.
/// Checking each segment after decoding is what catches `%2e%2e` and
/// `%2F..%2F`; decoding once only, as browsers encode once, means `%252e`
/// stays the literal name `%2e` and cannot become `..`.
pub(super) fn relative_path(raw: &str) -> Option<RelativePath> {
    let raw = raw.strip_prefix('/')?;
    let mut path = PathBuf::new();
    for segment in raw.split('/') {
        let decoded = percent_decode(segment)?;
        if decoded.contains(['/', '\\', '\0']) {
            return None;
        }
        match decoded.as_str() {
            "" | "." => {}
            ".." => return None,
            name => {
                // `Path::join` replaces the whole path when handed an absolute
                // or prefixed component (a drive letter on Windows), so take
                // only names that stay plain names.
                let mut components = Path::new(name).components();
                match (components.next(), components.next()) {
                    (Some(Component::Normal(_)), None) => path.push(name),
                    _ => return None,
                }
            }
        }
    }
    Some(RelativePath {
        path,
        trailing_slash: raw.is_empty() || raw.ends_with('/'),
    })
}

/// Percent-decodes `input`, or `None` if an escape is malformed or the result
/// is not UTF-8. `+` is left alone: in a path it is a literal plus.
pub(super) fn percent_decode(input: &str) -> Option<String> {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%' {
            let high = hex_value(*bytes.get(i + 1)?)?;
            let low = hex_value(*bytes.get(i + 2)?)?;
            out.push(high << 4 | low);
            i += 3;
        } else {
            out.push(byte);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|value| u8::try_from(value).ok())
}

/// The `Content-Type` for a file, chosen by its extension (case-insensitive).
pub(super) fn content_type(path: &Path) -> &'static str {
    let extension = path
        .extension()
        .and_then(|extension| extension.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match extension.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "ico" => "image/x-icon",
        "csv" => "text/csv; charset=utf-8",
        "txt" => "text/plain; charset=utf-8",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

/// The `Content-Disposition` value for a file below `downloads/`, or `None`
/// for any other file.
pub(super) fn download_disposition(relative: &Path) -> Option<String> {
    let mut components = relative.components();
    if components.next() != Some(Component::Normal("downloads".as_ref())) {
        return None;
    }
    let name = relative.file_name()?.to_string_lossy();
    // A quoted-string may not hold `"` or `\` unescaped, and a header value
    // must be visible ASCII; fixture names are plain, so replacing anything
    // else keeps the header valid without an RFC 5987 `filename*`.
    let safe: String = name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() || c == ' ') && c != '"' && c != '\\' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(format!("attachment; filename=\"{safe}\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(raw: &str) -> Option<PathBuf> {
        relative_path(raw).map(|r| r.path)
    }

    #[test]
    fn plain_paths_map_below_the_root() {
        assert_eq!(rel("/"), Some(PathBuf::new()));
        assert_eq!(rel("/a/b.html"), Some(PathBuf::from("a/b.html")));
        assert_eq!(rel("//a/./b.html"), Some(PathBuf::from("a/b.html")));
        assert_eq!(rel("/a%20b.txt"), Some(PathBuf::from("a b.txt")));
        assert_eq!(rel("/caf%C3%A9.txt"), Some(PathBuf::from("café.txt")));
        assert_eq!(rel("/%252e%252e/x"), Some(PathBuf::from("%2e%2e/x")));
    }

    #[test]
    fn trailing_slash_is_reported() {
        let folder = relative_path("/a/").unwrap();
        assert!(folder.trailing_slash);
        let file = relative_path("/a").unwrap();
        assert!(!file.trailing_slash);
        assert!(relative_path("/").unwrap().trailing_slash);
    }

    #[test]
    fn traversal_in_any_encoding_is_rejected() {
        for raw in [
            "/..",
            "/../secret.txt",
            "/a/../../secret.txt",
            "/%2e%2e/secret.txt",
            "/%2E%2E/secret.txt",
            "/.%2e/secret.txt",
            "/a%2f..%2fsecret.txt",
            "/a%2F..%2Fsecret.txt",
            "/..%5csecret.txt",
            "/a%00b",
            "/%zz",
            "/%2",
            "/%ff",
            "relative",
        ] {
            assert_eq!(relative_path(raw), None, "{raw} must be rejected");
        }
    }

    #[test]
    fn content_types_follow_the_extension() {
        for (name, expected) in [
            ("a.html", "text/html; charset=utf-8"),
            ("A.HTML", "text/html; charset=utf-8"),
            ("a.css", "text/css; charset=utf-8"),
            ("a.js", "text/javascript; charset=utf-8"),
            ("a.json", "application/json"),
            ("a.png", "image/png"),
            ("a.jpg", "image/jpeg"),
            ("a.svg", "image/svg+xml"),
            ("a.csv", "text/csv; charset=utf-8"),
            ("a.txt", "text/plain; charset=utf-8"),
            ("a.ico", "image/x-icon"),
            ("a.bin", "application/octet-stream"),
            ("noextension", "application/octet-stream"),
        ] {
            assert_eq!(content_type(Path::new(name)), expected, "{name}");
        }
    }

    #[test]
    fn only_downloads_get_a_disposition() {
        assert_eq!(
            download_disposition(Path::new("downloads/report.csv")).as_deref(),
            Some("attachment; filename=\"report.csv\"")
        );
        assert_eq!(
            download_disposition(Path::new("downloads/sub/a\"b.txt")).as_deref(),
            Some("attachment; filename=\"a_b.txt\"")
        );
        assert_eq!(download_disposition(Path::new("report.csv")), None);
        assert_eq!(download_disposition(Path::new("x/downloads/a.csv")), None);
    }
}
