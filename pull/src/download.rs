//! The hub's HTTP side: `api/models/<repo>/revision/<revision>` for the
//! commit and its files, then per file a `HEAD` of
//! `<repo>/resolve/<commit>/<file>` for its etag and size (following the
//! hub's relative redirects, stopping at the LFS store's absolute one, as
//! `huggingface_hub`'s `get_hf_file_metadata`), then a `GET` into
//! `blobs/<etag>.incomplete` under the blob's lock, resumed with `Range`
//! from what a broken download left, checked (size; sha256 for LFS files,
//! whose etag it is), renamed to `blobs/<etag>` and linked from the snapshot.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use embedder::hub::api::{self, Asked, RepoFile};
use embedder::hub::lock::FileLock;
use embedder::hub::{HfCache, HubId, Snapshot};
use embedder::{Error, ErrorKind};
use sha2::{Digest, Sha256};

use crate::progress::Progress;

/// Redirects followed per request.
const MAX_REDIRECTS: usize = 10;

/// Bytes per read of a download.
const CHUNK: usize = 256 << 10;

/// A hub endpoint and the token sent to it.
pub struct Hub {
    endpoint: String,
    token: Option<String>,
    agent: ureq::Agent,
}

/// What a `HEAD` of a file said.
struct Meta {
    etag: String,
    size: u64,
    /// Where its bytes are (the resolve URL, or the LFS store's).
    url: String,
}

/// `scheme://host[:port]` of an absolute URL.
fn origin(url: &str) -> &str {
    let after = url.find("://").map_or(0, |i| i + 3);
    let end = url[after..].find('/').map_or(url.len(), |i| after + i);
    &url[..end]
}

/// Percent-encodes everything but unreserved characters (and `/` when `keep_slash`).
fn encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn header<'a>(r: &'a ureq::http::Response<ureq::Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A write failure, naming a full disk as such.
fn write_error(path: &Path, e: std::io::Error, file: &str, done: u64, size: u64) -> Error {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::StorageFull | K::FileTooLarge | K::QuotaExceeded => Error::new(
            ErrorKind::Io,
            format!(
                "no space to write {file} ({done} of {size} bytes written to {}: {e}): free some \
                 space or point HF_HUB_CACHE at a larger disk, then run embd pull again to resume",
                path.display()
            ),
        ),
        _ => Error::io(path.display(), e),
    }
}

impl Hub {
    /// A client of `endpoint` (`http://` or `https://`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for another scheme.
    pub fn new(endpoint: &str, token: Option<String>) -> Result<Hub, Error> {
        if !(endpoint.starts_with("https://") || endpoint.starts_with("http://")) {
            return Err(Error::invalid_argument(format!(
                "HF_ENDPOINT '{endpoint}' is not an http:// or https:// URL"
            )));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_connect(Some(Duration::from_secs(20)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .timeout_per_read(Some(Duration::from_secs(60)))
            .user_agent(format!("embd/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Hub {
            endpoint: endpoint.to_string(),
            token,
            agent,
        })
    }

    /// Fetches what a conversion of `id` needs into `cache` and points the
    /// revision at its commit.
    ///
    /// # Errors
    /// The hub's answers as [`api::hub_error`] names them, network and disk
    /// failures, a truncated or corrupt download.
    pub fn pull(&self, cache: &HfCache, id: &HubId) -> Result<Snapshot, Error> {
        let info = self.info(id)?;
        let files = api::files_to_fetch(&id.repo, &info)?;
        for f in &files {
            self.file(cache, id, &info.commit, f)?;
        }
        if id.revision() != info.commit {
            cache.write_ref(id, id.revision(), &info.commit)?;
        }
        Ok(Snapshot {
            dir: cache.snapshot_dir(id, &info.commit),
            commit: info.commit,
        })
    }

    fn request(
        &self,
        method: &str,
        url: &str,
    ) -> ureq::RequestBuilder<ureq::typestate::WithoutBody> {
        let r = match method {
            "HEAD" => self.agent.head(url),
            _ => self.agent.get(url),
        };
        let r = r.header("Accept-Encoding", "identity");
        // The token goes to the hub only, never to the LFS store a
        // redirect points at.
        match &self.token {
            Some(t) if origin(url) == origin(&self.endpoint) => {
                r.header("Authorization", format!("Bearer {t}"))
            }
            _ => r,
        }
    }

    /// A request that could not be made or answered, naming the cause.
    fn net_error(&self, url: &str, e: ureq::Error) -> Error {
        let host = origin(url);
        let text = match &e {
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => format!(
                "cannot reach {host}: connection refused (no network, or nothing listens at HF_ENDPOINT={})",
                self.endpoint
            ),
            ureq::Error::HostNotFound => format!(
                "cannot reach {host}: its name does not resolve (no network, or a wrong HF_ENDPOINT)"
            ),
            ureq::Error::ConnectionFailed => format!("cannot reach {host}: the connection failed (no network?)"),
            ureq::Error::Timeout(t) => format!("{host} did not answer in time ({t})"),
            _ => format!("{url}: {e}"),
        };
        Error::new(ErrorKind::Io, text)
    }

    fn info(&self, id: &HubId) -> Result<api::RepoInfo, Error> {
        let url = format!(
            "{}/api/models/{}/revision/{}",
            self.endpoint,
            id.repo,
            encode(id.revision(), false)
        );
        let mut r = self
            .request("GET", &url)
            .call()
            .map_err(|e| self.net_error(&url, e))?;
        let status = r.status().as_u16();
        if !(200..300).contains(&status) {
            return Err(api::hub_error(
                status,
                header(&r, "x-error-code"),
                header(&r, "x-error-message"),
                Asked::Info {
                    repo: &id.repo,
                    revision: id.revision(),
                },
                self.token.is_some(),
            ));
        }
        let body = r
            .body_mut()
            .with_config()
            .limit(api::MAX_INFO_BYTES as u64 + 1)
            .read_to_vec()
            .map_err(|e| self.net_error(&url, e))?;
        api::parse_repo_info(&body).map_err(|e| e.context(&url))
    }

    /// `HEAD` of a file: its etag, size and where its bytes are.
    fn meta(&self, id: &HubId, commit: &str, file: &str) -> Result<Meta, Error> {
        let asked = Asked::File {
            repo: &id.repo,
            revision: commit,
            file,
        };
        let mut url = format!(
            "{}/{}/resolve/{commit}/{}",
            self.endpoint,
            id.repo,
            encode(file, true)
        );
        for _ in 0..MAX_REDIRECTS {
            let r = self
                .request("HEAD", &url)
                .call()
                .map_err(|e| self.net_error(&url, e))?;
            let status = r.status().as_u16();
            let location = header(&r, "location").map(str::to_string);
            let (relative, next) = match &location {
                Some(l) if (300..400).contains(&status) => {
                    if l.starts_with('/') {
                        (true, format!("{}{l}", origin(&url)))
                    } else {
                        (false, l.clone())
                    }
                }
                _ => (false, url.clone()),
            };
            if relative {
                url = next;
                continue;
            }
            if !(200..400).contains(&status) {
                return Err(api::hub_error(
                    status,
                    header(&r, "x-error-code"),
                    header(&r, "x-error-message"),
                    asked,
                    self.token.is_some(),
                ));
            }
            let etag = header(&r, "x-linked-etag").or_else(|| header(&r, "etag")).ok_or_else(|| {
                Error::new(
                    ErrorKind::Format,
                    format!("{url}: the answer has no ETag, so the file cannot be stored in the HuggingFace cache"),
                )
            })?;
            let etag = api::normalize_etag(etag).map_err(|e| e.context(&url))?;
            let size = header(&r, "x-linked-size")
                .or_else(|| header(&r, "content-length"))
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Format,
                        format!("{url}: the answer gives no size (X-Linked-Size, Content-Length)"),
                    )
                })?;
            return Ok(Meta {
                etag,
                size,
                url: next,
            });
        }
        Err(Error::new(
            ErrorKind::Io,
            format!("{url}: more than {MAX_REDIRECTS} redirects"),
        ))
    }

    /// One file into the cache: its blob (unless there), then its link.
    fn file(&self, cache: &HfCache, id: &HubId, commit: &str, f: &RepoFile) -> Result<(), Error> {
        let meta = self.meta(id, commit, &f.name)?;
        if let Some(s) = f.size.filter(|&s| s != meta.size) {
            return Err(Error::new(
                ErrorKind::Format,
                format!(
                    "{}: the hub lists {s} bytes, its file answer {} bytes",
                    f.name, meta.size
                ),
            ));
        }
        let blob = cache.blob(id, &meta.etag);
        if !complete(&blob, meta.size) {
            let _turn = FileLock::acquire(&cache.blob_lock(id, &meta.etag))?;
            // Another process may have fetched it while this one waited.
            if !complete(&blob, meta.size) {
                self.download(id, &f.name, &meta, &blob)?;
            }
        }
        cache.link(id, commit, &f.name, &meta.etag)?;
        Ok(())
    }

    /// Downloads a blob through `<blob>.incomplete`, resuming what is there.
    fn download(&self, id: &HubId, file: &str, meta: &Meta, blob: &Path) -> Result<(), Error> {
        let part = blob.with_file_name(format!(
            "{}.incomplete",
            blob.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
        if let Some(d) = part.parent() {
            std::fs::create_dir_all(d).map_err(|e| write_error(d, e, file, 0, meta.size))?;
        }
        let mut out = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&part)
            .map_err(|e| write_error(&part, e, file, 0, meta.size))?;
        let mut have = out
            .metadata()
            .map_err(|e| Error::io(part.display(), e))?
            .len();
        if have > meta.size {
            have = 0;
        }
        let mut sha = Sha256::new();
        if have > 0 {
            hash_prefix(&mut out, have, &mut sha).map_err(|e| Error::io(part.display(), e))?;
        }
        let mut r = self.get_from(id, file, &meta.url, have)?;
        let status = r.status().as_u16();
        if status == 200 && have > 0 {
            // The server ignored the range: start over.
            have = 0;
            sha = Sha256::new();
        } else if status == 416 && have == meta.size {
            // Already complete.
        } else if status != 200 && status != 206 {
            return Err(api::hub_error(
                status,
                header(&r, "x-error-code"),
                header(&r, "x-error-message"),
                Asked::File {
                    repo: &id.repo,
                    revision: "",
                    file,
                },
                self.token.is_some(),
            ));
        }
        out.set_len(have)
            .and_then(|_| out.seek(SeekFrom::Start(have)).map(|_| ()))
            .map_err(|e| write_error(&part, e, file, have, meta.size))?;
        if have < meta.size {
            if have > 0 {
                eprintln!("{file}: resuming at byte {have} of {}", meta.size);
            }
            let mut bar = Progress::new("downloading");
            let mut reader = r.body_mut().with_config().limit(u64::MAX).reader();
            let mut buf = vec![0u8; CHUNK];
            while have < meta.size {
                let n = match reader.read(&mut buf) {
                    Ok(0) => {
                        return Err(truncated(
                            id,
                            file,
                            have,
                            meta.size,
                            "the connection closed early",
                        ))
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(truncated(id, file, have, meta.size, &e.to_string())),
                };
                let n_u = n as u64;
                if have + n_u > meta.size {
                    return Err(Error::new(
                        ErrorKind::Format,
                        format!(
                            "{file}: the server sent more than the {} bytes it announced",
                            meta.size
                        ),
                    ));
                }
                out.write_all(&buf[..n])
                    .map_err(|e| write_error(&part, e, file, have, meta.size))?;
                sha.update(&buf[..n]);
                have += n_u;
                bar.update(have, meta.size);
            }
            bar.finish();
        }
        out.sync_all()
            .map_err(|e| write_error(&part, e, file, have, meta.size))?;
        drop(out);
        if api::is_sha256(&meta.etag) {
            let got = format!("{:x}", sha.finalize());
            if !got.eq_ignore_ascii_case(&meta.etag) {
                let _ = std::fs::remove_file(&part);
                return Err(Error::new(
                    ErrorKind::Checksum,
                    format!(
                        "{file}: the downloaded bytes have sha256 {got}, the hub says {}: the download \
                         is corrupt and was removed; run embd pull again",
                        meta.etag
                    ),
                ));
            }
        }
        std::fs::rename(&part, blob).map_err(|e| Error::io(blob.display(), e))?;
        eprintln!("fetched {file} ({} bytes)", meta.size);
        Ok(())
    }

    /// `GET url` from byte `from`, following redirects.
    fn get_from(
        &self,
        id: &HubId,
        file: &str,
        url: &str,
        from: u64,
    ) -> Result<ureq::http::Response<ureq::Body>, Error> {
        let mut url = url.to_string();
        for _ in 0..MAX_REDIRECTS {
            let mut req = self.request("GET", &url);
            if from > 0 {
                req = req.header("Range", format!("bytes={from}-"));
            }
            let r = req.call().map_err(|e| self.net_error(&url, e))?;
            let status = r.status().as_u16();
            match header(&r, "location") {
                Some(l) if (300..400).contains(&status) => {
                    url = if l.starts_with('/') {
                        format!("{}{l}", origin(&url))
                    } else {
                        l.to_string()
                    };
                }
                _ => return Ok(r),
            }
        }
        Err(Error::new(
            ErrorKind::Io,
            format!("{}/{file}: more than {MAX_REDIRECTS} redirects", id.repo),
        ))
    }
}

/// Whether `blob` is there with `size` bytes.
fn complete(blob: &Path, size: u64) -> bool {
    std::fs::metadata(blob).is_ok_and(|m| m.is_file() && m.len() == size)
}

/// Feeds the first `n` bytes of `f` to `sha`.
fn hash_prefix(f: &mut File, n: u64, sha: &mut Sha256) -> std::io::Result<()> {
    f.seek(SeekFrom::Start(0))?;
    let mut left = n;
    let mut buf = vec![0u8; CHUNK];
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let got = f.read(&mut buf[..want])?;
        if got == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "partial download shrank",
            ));
        }
        sha.update(&buf[..got]);
        left -= got as u64;
    }
    Ok(())
}

fn truncated(id: &HubId, file: &str, have: u64, size: u64, why: &str) -> Error {
    Error::new(
        ErrorKind::Io,
        format!(
            "download of {file} stopped at {have} of {size} bytes ({why}): the download is truncated; \
             run `embd pull {id}` again to resume from there"
        ),
    )
}
