#!/bin/bash
# What make check-arm64 needs on Debian (tested on Debian 12 "bookworm"):
#
#   dpkg architecture arm64        multiarch, for the arm64 Check library
#   gcc-aarch64-linux-gnu          the cross compiler (and its binutils)
#   libc6-dev-arm64-cross          arm64 libc headers and link files
#   check:arm64 libsubunit-dev:arm64   libcheck_pic.a and libsubunit for arm64
#                                  (pulls libc6:arm64: /lib/ld-linux-aarch64.so.1)
#   libunwind-dev:arm64            libunwind.h for the call-site profile (the
#                                  library dlopens libunwind.so.8 at run time)
#   qemu-user >= 1:8.0             bookworm's own 7.2 aborts on calls the
#                                  tests make on purpose (mprotect with a
#                                  length that wraps: "page_set_flags:
#                                  Assertion `start < end' failed"), so on
#                                  bookworm it comes from bookworm-backports
#                                  (10.0, statically linked, no dependencies)
#
# "deps.sh system" (make check-arm64-system) also needs:
#
#   qemu-system-arm                qemu-system-aarch64 (bookworm's 7.2 is enough)
#   cpio                           to build the VM's initramfs
#   bookworm-backports in apt's sources: the arm64 kernels the VM boots
#                                  (6.12: mTHP, contiguous PTEs) are
#                                  downloaded from there by tests/arm64/system.sh
#
# Run as root it installs what is missing (adding the arm64 architecture and,
# on bookworm, the bookworm-backports source when needed); otherwise it prints
# the exact commands and exits 1.  Nothing is done when all is there.
set -u
HOST_PKGS=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
GUEST_PKGS=(check:arm64 libsubunit-dev:arm64 libunwind-dev:arm64)
QEMU_MIN=1:8.0
SYSTEM=0
if [ "${1:-}" = system ]; then
	SYSTEM=1
	HOST_PKGS+=(qemu-system-arm cpio)
fi

if ! command -v dpkg-query >/dev/null; then
	echo "mmfold: not Debian; install an aarch64-linux-gnu cross gcc, qemu-aarch64 (8.0 or later)" \
		"and the arm64 Check library, then run make check-arm64 ARM64_NO_DEPS=1"
	exit 1
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null; }

missing=()
for p in "${HOST_PKGS[@]}" "${GUEST_PKGS[@]}"; do
	installed "$p" || missing+=("$p")
done
qemu_ok=0
if installed qemu-user && dpkg --compare-versions "$(version qemu-user)" ge "$QEMU_MIN"; then
	qemu_ok=1
fi
# shellcheck source=/dev/null
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
has_bpo=1
if ! grep -rqsE '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	has_bpo=0
fi
need_bpo=0
[ $SYSTEM = 1 ] && [ "$codename" = bookworm ] && [ $has_bpo = 0 ] && need_bpo=1
[ ${#missing[@]} = 0 ] && [ $qemu_ok = 1 ] && [ $need_bpo = 0 ] && exit 0

add_arch=0
dpkg --print-foreign-architectures | grep -qx arm64 || add_arch=1

# qemu-user: from bookworm-backports on bookworm, else the release's own.
add_bpo=0 bpo_file=/etc/apt/sources.list.d/bookworm-backports.sources bpo_text=''
if [ $qemu_ok = 0 ] || [ $need_bpo = 1 ]; then
	if [ "$codename" = bookworm ]; then
		if [ $qemu_ok = 0 ]; then
			missing+=(qemu-user/bookworm-backports)
			# qemu-user 10 breaks these older companions: upgrade them too.
			for p in qemu-user-binfmt qemu-user-static; do
				installed "$p" && missing+=("$p/bookworm-backports")
			done
		fi
		if [ $has_bpo = 0 ]; then
			add_bpo=1
			# the mirror bookworm already comes from
			uri=$(apt-cache policy 2>/dev/null | awk '$3 == "bookworm/main" {print $2; exit}')
			bpo_text="Types: deb\nURIs: ${uri:-http://deb.debian.org/debian}\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
		fi
	elif [ $qemu_ok = 0 ]; then
		missing+=(qemu-user)
	fi
fi

list=$(printf ' %s' "${missing[@]}")
install_cmd="apt-get install -y -q --no-install-recommends$list"
if [ "$(id -u)" != 0 ]; then
	echo "mmfold: missing for the arm64 tests:$list; run:"
	[ $add_arch = 1 ] && echo "  sudo dpkg --add-architecture arm64"
	[ $add_bpo = 1 ] && echo "  printf '$bpo_text' | sudo tee $bpo_file"
	echo "  sudo apt-get update"
	echo "  sudo $install_cmd"
	exit 1
fi

echo "mmfold: installing for the arm64 tests:$list"
{
	if [ $add_arch = 1 ]; then
		echo "mmfold: dpkg --add-architecture arm64"
		dpkg --add-architecture arm64 || exit 1
	fi
	if [ $add_bpo = 1 ]; then
		echo "mmfold: adding $bpo_file"
		printf '%b' "$bpo_text" >"$bpo_file" || exit 1
	fi
	if [ $add_arch = 1 ] || [ $add_bpo = 1 ]; then
		apt-get update -q && $install_cmd
	else
		$install_cmd || { apt-get update -q && $install_cmd; }
	fi
} >&2
