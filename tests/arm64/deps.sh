#!/bin/bash
# What make check-arm64-system needs on Debian (tested on Debian 12
# "bookworm"):
#
#   dpkg architecture arm64        multiarch, for the arm64 Check library
#   gcc-aarch64-linux-gnu          the cross compiler (and its binutils)
#   libc6-dev-arm64-cross          arm64 libc headers and link files
#   check:arm64 libsubunit-dev:arm64   libcheck_pic.a and libsubunit for arm64
#                                  (pulls libc6:arm64: /lib/ld-linux-aarch64.so.1)
#   libunwind-dev:arm64            libunwind.h for the call-site profile (the
#                                  library dlopens libunwind.so.8 at run time)
#   qemu-system-arm >= 1:10.0      qemu-system-aarch64; on bookworm from
#                                  bookworm-backports (10.0): bookworm's 7.2
#                                  kept running code from a 16 KiB guest page
#                                  after mprotect took PROT_EXEC away (it
#                                  drops its cache of translated code for only
#                                  4 KiB of such a page), which failed a W^X
#                                  test on the 16 KiB kernel without mmfold
#   cpio                           to build the VM's initramfs
#   bookworm-backports in apt's sources: the arm64 kernels the VM boots
#                                  (6.12: mTHP, contiguous PTEs) are
#                                  downloaded from there by tests/arm64/system.sh
#
# Run as root it installs what is missing (adding the arm64 architecture and,
# on bookworm, the bookworm-backports source when needed); otherwise it prints
# the exact commands and exits 1.  Nothing is done when all is there.
set -u
HOST_PKGS=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross cpio)
QEMU_MIN=1:10.0
GUEST_PKGS=(check:arm64 libsubunit-dev:arm64 libunwind-dev:arm64)

if ! command -v dpkg-query >/dev/null; then
	echo "mmfold: not Debian; install an aarch64-linux-gnu cross gcc, qemu-system-aarch64, cpio" \
		"and the arm64 Check library, then run make check-arm64-system ARM64_NO_DEPS=1"
	exit 1
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null; }

missing=()
for p in "${HOST_PKGS[@]}" "${GUEST_PKGS[@]}"; do
	installed "$p" || missing+=("$p")
done
# shellcheck source=/dev/null
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
if ! installed qemu-system-arm || ! dpkg --compare-versions "$(version qemu-system-arm)" ge "$QEMU_MIN"; then
	if [ "$codename" = bookworm ]; then
		missing+=(qemu-system-arm/bookworm-backports qemu-system-common/bookworm-backports
			qemu-system-data/bookworm-backports)
	else
		missing+=(qemu-system-arm)
	fi
fi
add_bpo=0 bpo_file=/etc/apt/sources.list.d/bookworm-backports.sources bpo_text=''
if [ "$codename" = bookworm ] &&
	! grep -rqsE '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	add_bpo=1
	# the mirror bookworm already comes from
	uri=$(apt-cache policy 2>/dev/null | awk '$3 == "bookworm/main" {print $2; exit}')
	bpo_text="Types: deb\nURIs: ${uri:-http://deb.debian.org/debian}\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
fi
[ ${#missing[@]} = 0 ] && [ $add_bpo = 0 ] && exit 0

add_arch=0
dpkg --print-foreign-architectures | grep -qx arm64 || add_arch=1

list=$(printf ' %s' "${missing[@]}")
install_cmd="apt-get -o DPkg::Lock::Timeout=1200 install -y -q --no-install-recommends$list"
if [ "$(id -u)" != 0 ]; then
	echo "mmfold: missing for the arm64 tests:$list; run:"
	[ $add_arch = 1 ] && echo "  sudo dpkg --add-architecture arm64"
	[ $add_bpo = 1 ] && echo "  printf '$bpo_text' | sudo tee $bpo_file"
	echo "  sudo apt-get update"
	[ ${#missing[@]} = 0 ] || echo "  sudo $install_cmd"
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
		apt-get update -q || exit 1
	fi
	if [ ${#missing[@]} != 0 ]; then
		$install_cmd || { apt-get update -q && $install_cmd; }
	fi
} >&2
