//! Replacing a file people keep (the configuration, a host's settings file, a report): the
//! one way toolbrake writes such a file.
//!
//! The new content goes into a temporary file with an unpredictable name, created
//! exclusively in the target's own directory (never through an existing file or link),
//! is flushed to disk, optionally checked, and renamed over the target: a reader sees the
//! old file or the new one, never a part, and concurrent writers never share a temporary
//! file. A symlinked target (dotfiles setups) is written where the link points, so the
//! link stays a link; a link where toolbrake names a file of its own (a backup) is never
//! followed ([`replace_own`]). A new file is owner-only; an existing one keeps its permissions
//! unless the caller asks for a mode.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// How many symbolic links are followed before giving up (as the kernel does).
const MAX_LINKS: usize = 40;

/// The file a write to `path` must replace: `path` itself, or, when it is a symbolic link
/// (possibly to a link), the file it finally points to (which need not exist yet).
pub fn write_target(path: &Path) -> io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            Ok(_) => return Ok(current),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(current),
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "{}: more than {MAX_LINKS} levels of symbolic links",
        path.display()
    )))
}

/// Reads a file people keep as text, `Ok(None)` when there is none. Only a regular file (or
/// a link to one) is read, and at most `cap` bytes: a FIFO planted at its name is opened
/// without waiting for a writer and refused, as is a device (`/dev/zero`), a folder, a
/// larger file, or one that is not UTF-8, each with an error saying so.
pub fn read_regular(path: &Path, cap: u64) -> io::Result<Option<String>> {
    use std::io::Read;
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK);
    }
    let file = match opts.open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    let too_large = |n: u64| io::Error::other(format!("it is {n} bytes; the limit is {cap}"));
    if meta.len() > cap {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(too_large(bytes.len() as u64));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// Whether an existing file's owner may not write it (the user made it read-only).
pub fn is_read_only(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.permissions().readonly())
}

/// The permission bits of an existing file (`None` when it does not exist, or off Unix).
pub fn mode_of(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .ok()
            .map(|m| m.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Replaces `path` with `bytes` (see the module's description). `mode`: the permission
/// bits to give the file; `None` keeps an existing file's, and makes a new one owner-only.
/// Returns the file written (the link's target when `path` is a symbolic link).
pub fn replace(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<PathBuf> {
    replace_checked(path, bytes, mode, |_| Ok(()), |e| e)
}

/// [`replace`] for a file whose name toolbrake chose itself (a backup, its own state): a
/// symbolic link found there was planted, not kept by the user, so it is replaced by the
/// file rather than written through.
pub fn replace_own(path: &Path, bytes: &[u8], mode: Option<u32>) -> io::Result<PathBuf> {
    write(path.to_path_buf(), bytes, mode, |_| Ok(()), |e| e)
}

/// [`replace`], running `check` on the complete temporary file before the rename: when it
/// fails, the temporary file is removed, the target is untouched, and its error is returned.
/// I/O errors are turned into the caller's error type with `io_error`.
pub fn replace_checked<E>(
    path: &Path,
    bytes: &[u8],
    mode: Option<u32>,
    check: impl FnOnce(&Path) -> Result<(), E>,
    io_error: impl Fn(io::Error) -> E,
) -> Result<PathBuf, E> {
    let target = write_target(path).map_err(&io_error)?;
    write(target, bytes, mode, check, io_error)
}

fn write<E>(
    target: PathBuf,
    bytes: &[u8],
    mode: Option<u32>,
    check: impl FnOnce(&Path) -> Result<(), E>,
    io_error: impl Fn(io::Error) -> E,
) -> Result<PathBuf, E> {
    let dir = target
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    // Created exclusively (O_EXCL), owner-only, with a random name: no other writer, and
    // no link planted in the directory, can be written through.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(&io_error)?;
    let mode = mode.or_else(|| mode_of(&target)).unwrap_or(0o600);
    let written = (|| {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            tmp.as_file()
                .set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        #[cfg(not(unix))]
        let _ = mode;
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all()
    })();
    written.map_err(&io_error)?;
    // On an error below, dropping `tmp` removes the temporary file.
    check(tmp.path())?;
    tmp.persist(&target).map_err(|e| io_error(e.error))?;
    // The rename is durable once the directory is (best effort: not every platform can
    // open a directory).
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("toolbrake-files-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_failed_check_leaves_the_file_and_no_temporary() {
        let d = dir("check");
        let f = d.join("a.toml");
        std::fs::write(&f, "old").unwrap();
        let r = replace_checked(&f, b"new", None, |_| Err("no"), |_| "io");
        assert_eq!(r, Err("no"));
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "old");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[cfg(unix)]
    #[test]
    fn links_are_written_through_and_modes_kept() {
        use std::os::unix::fs::PermissionsExt;
        let d = dir("links");
        let real = d.join("real.toml");
        std::fs::write(&real, "old").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink("real.toml", d.join("one")).unwrap();
        std::os::unix::fs::symlink(d.join("one"), d.join("two")).unwrap();
        assert_eq!(replace(&d.join("two"), b"new", None).unwrap(), real);
        assert!(std::fs::symlink_metadata(d.join("two"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        assert_eq!(mode_of(&real), Some(0o640));
        replace(&d.join("fresh"), b"x", None).unwrap();
        assert_eq!(mode_of(&d.join("fresh")), Some(0o600));
        std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
        assert!(replace(&d.join("loop"), b"x", None).is_err());
        // A planted link where toolbrake names its own file is replaced, not followed.
        replace_own(&d.join("one"), b"own", None).unwrap();
        assert!(!std::fs::symlink_metadata(d.join("one"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
        let _ = std::fs::remove_dir_all(&d);
    }
}
