#!/usr/bin/env bash
# Install (or find) the terminal editors the LSP client tests drive, from Debian's
# packages: Emacs 28 with eglot 1.9 (emacs-nox, elpa-eglot) and Vim 9 with ALE 3.3
# (vim, vim-ale). Idempotent: `apt-get update` and `apt-get install` run only when a
# package is missing (dpkg -s is cheap).
# Prints `KEY=VALUE` lines last on stdout (EMACS, EGLOT, VIM, ALE) for the tests to
# read; everything else goes to stderr.
# Exit 3: the packages cannot be installed here (no apt-get, not root and no sudo, no
# such package, no network); the tests skip with this script's message as the reason.
set -euo pipefail

log() { echo "setup-terminal-editors: $*" >&2; }
cannot() { log "$*"; exit 3; }

PACKAGES=(emacs-nox elpa-eglot vim vim-ale)
missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || cannot "no apt-get to install ${missing[*]} (not a Debian system)"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        sudo -n true 2>/dev/null || cannot "installing ${missing[*]} needs root, and sudo asks for a password"
        sudo="sudo -n"
    fi
    log "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -q >&2 || cannot "apt-get update failed (no network?)"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 \
        || cannot "apt-get install ${missing[*]} failed"
fi

# The files the packages install, where the tests load them from.
EMACS=/usr/bin/emacs
VIM=/usr/bin/vim.basic   # Debian's `vim`; /usr/bin/vim may be another alternative (vim-tiny)
ALE=/usr/share/vim/vimfiles/pack/dist-bundle/opt/ale
EGLOT=$(ls -d /usr/share/emacs/site-lisp/elpa/eglot-* 2>/dev/null | head -n 1 || true)
[ -x "$EMACS" ] || { log "no $EMACS after installing emacs-nox"; exit 1; }
[ -x "$VIM" ] || { log "no $VIM after installing vim"; exit 1; }
[ -d "$ALE/autoload/ale" ] || { log "no ALE under $ALE after installing vim-ale"; exit 1; }
[ -n "$EGLOT" ] && [ -f "$EGLOT/eglot.el" ] || { log "no eglot under /usr/share/emacs/site-lisp/elpa after installing elpa-eglot"; exit 1; }
echo "EMACS=$EMACS"
echo "EGLOT=$EGLOT"
echo "VIM=$VIM"
echo "ALE=$ALE"
