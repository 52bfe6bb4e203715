//! Embeds the docs page's assets (`GET /docs`, `http/docs.rs`): the files
//! of the npm package swagger-ui-dist in `docs-page/vendor/`, committed as
//! `scripts/docs-assets` made them from the version and SHA-512 pinned in
//! `docs-page/swagger-ui-dist.pin` (CI's `scripts/docs-assets --check`
//! makes them again and compares), with their gzip copies, and the page's
//! own `docs-page/init.js`. No download at build time.
//!
//! Writes `$OUT_DIR/docs_assets.rs`: the table of assets, each by
//! `include_bytes!`, and the fingerprint of their bytes that versions
//! their URL (so a browser may cache them forever). A checkout whose
//! vendor/ is missing, incomplete, or of another version than the pin
//! still builds, with a warning: the table is empty and says why, and
//! `/docs` answers 404 saying so (and the docs page's tests fail).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{env, fs};

/// The vendored files the page uses, and whether `scripts/docs-assets`
/// made a gzip copy of each (the two big ones; the rest are too small
/// for compression to pay).
const VENDORED: [(&str, bool); 6] = [
    ("swagger-ui-bundle.js", true),
    ("swagger-ui.css", true),
    ("favicon-32x32.png", false),
    ("favicon-16x16.png", false),
    ("LICENSE", false),
    ("swagger-ui-bundle.js.LICENSE.txt", false),
];
// And `img-*`: the stylesheet's inline images, written out as files.

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let page = manifest.join("docs-page");
    let vendor = page.join("vendor");
    // Cargo runs this again when a watched path is newer than its last
    // run, and on every build when a watched path does not exist: so no
    // watching of vendor/ itself, which a broken checkout may lack, but
    // of the whole of docs-page/, which cargo scans to the bottom. It
    // holds all that is embedded, and its own time moves when vendor/
    // goes or comes back. It is there whenever this crate compiles (the
    // page's template is in it); if not, nothing is named, and cargo's
    // default (any change in the package) applies.
    if page.is_dir() {
        println!("cargo:rerun-if-changed=docs-page");
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default()).join("docs_assets.rs");
    let code = match assets(&page, &vendor) {
        Ok(code) => code,
        Err(Missing { why, detail }) => {
            println!("cargo:warning=the docs page is not built in: {why}{detail}; docs-page/vendor/ is committed: `git checkout -- petstore-server/docs-page/vendor` restores it, or scripts/docs-assets makes it again (GET /docs answers 404 until then)");
            format!(
                "/// Why this build has no docs page.\n\
                 pub(super) const NOT_BUILT_IN: Option<&str> = Some({why:?});\n\
                 /// No assets: they were not there.\n\
                 pub(super) const FINGERPRINT: &str = \"\";\n\
                 /// No assets: they were not there.\n\
                 pub(super) static ASSETS: &[Asset] = &[];\n"
            )
        }
    };
    if let Err(e) = fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}

/// Why the pinned assets are not there: `why` for `/docs`'s 404 (no
/// path: an error body names none), `detail` for the build's warning.
struct Missing {
    why: String,
    detail: String,
}

impl Missing {
    fn unreadable(path: &Path, e: &std::io::Error) -> Missing {
        Missing {
            why: "its files could not be read".into(),
            detail: format!(" ({}: {e})", path.display()),
        }
    }
}

/// The generated table, or why the pinned assets are not there.
fn assets(page: &Path, vendor: &Path) -> Result<String, Missing> {
    let pin_path = page.join("swagger-ui-dist.pin");
    let pin = fs::read_to_string(&pin_path).map_err(|e| Missing::unreadable(&pin_path, &e))?;
    let pinned = |field: &str| {
        pin.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix('='))
            .map(str::trim)
            .unwrap_or("")
            .to_owned()
    };
    let (version, integrity) = (pinned("version"), pinned("integrity"));
    // Its first line: what scripts/docs-assets fetched and checked. A
    // vendor/ made from another version than the pin (the pin moved and
    // vendor/ did not) is refused here rather than served as the pin's.
    let stamp = fs::read_to_string(vendor.join("fetched")).unwrap_or_default();
    let wanted = format!("swagger-ui-dist@{version} {integrity}");
    if stamp.lines().next() != Some(&wanted) {
        let why = if stamp.is_empty() {
            format!("the files of swagger-ui-dist@{version} were missing when it was built")
        } else {
            format!(
                "the files it was built with are not those of the pinned swagger-ui-dist@{version}"
            )
        };
        return Err(Missing {
            why,
            detail: String::new(),
        });
    }
    let mut files: Vec<(String, PathBuf, Option<PathBuf>)> = VENDORED
        .iter()
        .map(|(name, gzipped)| {
            let path = vendor.join(name);
            let gzip = gzipped.then(|| vendor.join(format!("{name}.gz")));
            ((*name).to_owned(), path, gzip)
        })
        .collect();
    // The stylesheet's images, which scripts/docs-assets wrote out of it.
    let mut images: Vec<String> = fs::read_dir(vendor)
        .map_err(|e| Missing::unreadable(vendor, &e))?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("img-"))
        .collect();
    images.sort();
    files.extend(images.into_iter().map(|name| {
        let path = vendor.join(&name);
        (name, path, None)
    }));
    files.push(("init.js".into(), page.join("init.js"), None));

    let mut fingerprint = Fnv::default();
    let mut table = String::new();
    for (name, path, gzip) in &files {
        let bytes = fs::read(path).map_err(|e| Missing::unreadable(path, &e))?;
        fingerprint.add(name.as_bytes());
        fingerprint.add(&bytes);
        let gzip = match gzip {
            Some(gz) if gz.is_file() => format!("Some(include_bytes!({:?}))", gz.display()),
            Some(gz) => {
                return Err(Missing {
                    why: "its files are incomplete".into(),
                    detail: format!(" ({} is missing)", gz.display()),
                })
            }
            None => "None".into(),
        };
        let _ = writeln!(
            table,
            "    Asset {{ name: {name:?}, content_type: {:?}, body: include_bytes!({:?}), gzip: {gzip} }},",
            content_type(name),
            path.display()
        );
    }
    Ok(format!(
        "/// Why this build has no docs page: it has one.\n\
         pub(super) const NOT_BUILT_IN: Option<&str> = None;\n\
         /// A hash of every asset's name and bytes: the URL segment that\n\
         /// versions them (swagger-ui-dist@{version} and `init.js`).\n\
         pub(super) const FINGERPRINT: &str = \"{:016x}\";\n\
         /// The page's assets, each with its gzip copy when it has one.\n\
         pub(super) static ASSETS: &[Asset] = &[\n{table}];\n",
        fingerprint.0
    ))
}

/// The `Content-Type` of an asset, by its name.
fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        Some("jpg") => "image/jpeg",
        _ => "text/plain; charset=utf-8",
    }
}

/// FNV-1a, 64 bits: a fingerprint, not a defence (the assets are ours),
/// written out rather than a build dependency for eight lines.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}
