#!/usr/bin/env bash
# A Debian 13 ("trixie") chroot with Debian's Swift toolchain (swiftlang), for
# building and testing the Swift package on hosts whose Debian has no swiftlang
# (Debian 12 has none).
#
#   scripts/swift_chroot.sh ensure          create or finish the chroot (idempotent), print its path
#   scripts/swift_chroot.sh path            print its path
#   scripts/swift_chroot.sh run [--bind DIR]... [--ro-bind DIR]... -- CMD ARG...
#                                           run CMD inside it with /proc mounted and each DIR
#                                           bind-mounted at the same path; everything is
#                                           unmounted again on exit (trap), also on failure
#   scripts/swift_chroot.sh remove          unmount leftovers and delete the chroot
#
# The chroot lives outside the clone, in
#   EMBD_SWIFT_CHROOT (default ${XDG_CACHE_HOME:-$HOME/.cache}/embedder/swift-trixie),
# and is reused by every clone on the machine. It is made with
#   debootstrap --variant=minbase trixie <dir> $EMBD_DEBIAN_MIRROR
# (default http://deb.debian.org/debian) into <dir>.partial, then
#   apt-get install --no-install-recommends swiftlang libc6-dev pkg-config git
# inside; only a finished chroot is renamed to <dir>, so an interrupted run
# starts again from scratch instead of using half a chroot. About 3.3 GB;
# the free space is checked before anything is written.
# Needs root (debootstrap, chroot, mount); installs debootstrap with apt-get
# when it is missing. Exit status 77 means "cannot run here at all" (not root,
# or no debootstrap/chroot available); every other failure is an error.
set -euo pipefail

CACHE_BASE="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}"
DIR="${EMBD_SWIFT_CHROOT:-$CACHE_BASE/embedder/swift-trixie}"
MIRROR="${EMBD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=trixie
PACKAGES=(swiftlang libc6-dev pkg-config git)
# Bump when PACKAGES or the setup below changes: an older chroot is then upgraded in place.
STAMP_VERSION=2
STAMP="$DIR/.embedder-swift-chroot"
NEED_GB_NEW=5   # the chroot (3.3 GB) plus the build trees
NEED_GB_OLD=1   # the Swift build trees only
# chroot, debootstrap and mount live in the sbin folders, which a non-login
# PATH (cron, `env -i`, some CI runners) leaves out.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin" ;; esac
case ":$PATH:" in *:/sbin:*) ;; *) PATH="$PATH:/sbin" ;; esac
export PATH
say() { printf '== swift_chroot: %s\n' "$*" >&2; }
cannot() { printf 'swift_chroot: cannot run here: %s\n' "$*" >&2; exit 77; }

check_capable() {
  [ "$(id -u)" = 0 ] || cannot "needs root for debootstrap, chroot and mount (running as uid $(id -u))"
  command -v chroot >/dev/null || cannot "no chroot command"
  if ! command -v debootstrap >/dev/null; then
    command -v apt-get >/dev/null || cannot "no debootstrap and no apt-get to install it"
    say "installing debootstrap (apt-get)"
    if ! apt-cache show debootstrap >/dev/null 2>&1; then apt-get update -qq; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  fi
}

# free_gb DIR: free space, in whole GB, of the file system holding DIR (or its nearest existing parent).
free_gb() {
  local d="$1"
  while [ ! -d "$d" ]; do d="$(dirname "$d")"; done
  df -Pk "$d" | awk 'NR == 2 { print int($4 / 1048576) }'
}

check_space() {
  local need="$1" have
  have="$(free_gb "$DIR")"
  if [ "$have" -lt "$need" ]; then
    echo "swift_chroot: $have GB free under $(dirname "$DIR"), need at least $need GB; free some space or set EMBD_SWIFT_CHROOT" >&2
    exit 1
  fi
}

# Devices a minbase chroot needs (debootstrap creates them; recreated if missing).
ensure_devices() {
  local root="$1"
  mkdir -p "$root/dev"
  [ -c "$root/dev/null" ] || { rm -f "$root/dev/null"; mknod -m 666 "$root/dev/null" c 1 3; }
  [ -c "$root/dev/zero" ] || { rm -f "$root/dev/zero"; mknod -m 666 "$root/dev/zero" c 1 5; }
  [ -c "$root/dev/random" ] || { rm -f "$root/dev/random"; mknod -m 666 "$root/dev/random" c 1 8; }
  [ -c "$root/dev/urandom" ] || { rm -f "$root/dev/urandom"; mknod -m 666 "$root/dev/urandom" c 1 9; }
}

# --- mounts ------------------------------------------------------------------
MOUNTS=()   # mounted paths, innermost last
unmount_all() {
  local i m
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
    m="${MOUNTS[$i]}"
    if mountpoint -q "$m"; then
      umount "$m" 2>/dev/null || umount -l "$m" || echo "swift_chroot: could not unmount $m" >&2
    fi
  done
  MOUNTS=()
}
# Leftovers of a run that was killed with SIGKILL (no trap ran): anything mounted under the root.
unmount_leftovers() {
  local root="$1" m
  [ -d "$root" ] || return 0
  # Deepest first (reverse sort of the mount points under $root).
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" || true
  done < <(awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r)
}
mount_proc() {
  local root="$1"
  mkdir -p "$root/proc"
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  MOUNTS+=("$root/proc")
}
mount_bind() {
  local root="$1" src="$2" ro="$3"
  src="$(cd "$src" && pwd -P)"
  mkdir -p "$root$src"
  mount --bind "$src" "$root$src"
  MOUNTS+=("$root$src")
  if [ "$ro" = 1 ]; then mount -o remount,bind,ro "$root$src"; fi
}

in_chroot() { local root="$1"; shift; chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin LANG=C.UTF-8 "$@"; }

# --- lock: one setup or run at a time per chroot ------------------------------
take_lock() {
  mkdir -p "$(dirname "$DIR")"
  exec 9>"$DIR.lock"
  if ! flock -w 3600 9; then echo "swift_chroot: $DIR.lock held for an hour; giving up" >&2; exit 1; fi
}

ready() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_VERSION" ]; }

ensure() {
  check_capable
  take_lock
  if ready; then
    unmount_leftovers "$DIR"
    check_space "$NEED_GB_OLD"
    echo "$DIR"
    return 0
  fi
  local root="$DIR"
  trap unmount_all EXIT
  trap 'exit 130' INT TERM
  if [ ! -d "$DIR" ]; then
    root="$DIR.partial"
    unmount_leftovers "$root"
    check_space "$NEED_GB_NEW"
    rm -rf --one-file-system "$root"
    say "debootstrap --variant=minbase $SUITE $root $MIRROR"
    local t0=$SECONDS
    debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$DIR.debootstrap.log" 2>&1 || {
      tail -n 30 "$DIR.debootstrap.log" >&2
      echo "swift_chroot: debootstrap failed (log: $DIR.debootstrap.log)" >&2
      exit 1
    }
    say "debootstrap took $((SECONDS - t0)) s"
  else
    # A finished chroot from an older STAMP_VERSION: upgrade it in place.
    unmount_leftovers "$root"
    check_space "$NEED_GB_OLD"
  fi
  ensure_devices "$root"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  # No daemons are started by package scripts inside the chroot.
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod 755 "$root/usr/sbin/policy-rc.d"
  mount_proc "$root"
  say "apt-get install --no-install-recommends ${PACKAGES[*]} (inside the chroot)"
  local t1=$SECONDS
  in_chroot "$root" apt-get update -qq
  in_chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get -o Dpkg::Use-Pty=0 install -y -qq --no-install-recommends "${PACKAGES[@]}" >/dev/null
  in_chroot "$root" apt-get clean
  say "apt-get install took $((SECONDS - t1)) s"
  say "$(in_chroot "$root" swift --version 2>&1 | head -n1)"
  unmount_all
  trap - EXIT INT TERM
  echo "$STAMP_VERSION" >"$root/.embedder-swift-chroot"
  [ "$root" = "$DIR" ] || mv "$root" "$DIR"
  say "ready: $DIR ($(du -sxh "$DIR" 2>/dev/null | cut -f1))"
  echo "$DIR"
}

run() {
  local binds=() robinds=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --bind) binds+=("$2"); shift 2 ;;
      --ro-bind) robinds+=("$2"); shift 2 ;;
      --) shift; break ;;
      *) echo "swift_chroot run: unknown option $1 (use -- before the command)" >&2; exit 2 ;;
    esac
  done
  [ $# -gt 0 ] || { echo "swift_chroot run: no command" >&2; exit 2; }
  check_capable
  take_lock
  ready || { echo "swift_chroot: $DIR is not set up; run scripts/swift_chroot.sh ensure" >&2; exit 1; }
  unmount_leftovers "$DIR"
  trap unmount_all EXIT
  # On INT/TERM: stop the command first (it runs in the background for that),
  # then the EXIT trap unmounts.
  CHILD=""
  trap 'if [ -n "$CHILD" ]; then kill -TERM -- "-$CHILD" 2>/dev/null || true; wait "$CHILD" 2>/dev/null || true; fi; exit 130' INT TERM
  ensure_devices "$DIR"
  mount_proc "$DIR"
  local d
  for d in "${binds[@]}"; do mount_bind "$DIR" "$d" 0; done
  for d in "${robinds[@]}"; do mount_bind "$DIR" "$d" 1; done
  local rc=0
  # A process group of its own (setsid), so that INT/TERM reaches every
  # process of the command (a build's compilers too), never a process outside.
  setsid chroot "$DIR" /usr/bin/env -i HOME=/root PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin LANG=C.UTF-8 \
    "$@" <&0 &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=""
  unmount_all
  trap - EXIT INT TERM
  return "$rc"
}

case "${1:-}" in
  ensure) ensure ;;
  path) echo "$DIR" ;;
  run) shift; run "$@" ;;
  remove)
    check_capable
    take_lock
    unmount_leftovers "$DIR"
    unmount_leftovers "$DIR.partial"
    rm -rf --one-file-system "$DIR" "$DIR.partial"
    say "removed $DIR"
    ;;
  *) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
