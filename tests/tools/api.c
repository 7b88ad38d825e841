/* A program using the public API (include/mmfold.h), built with
 * pkg-config --cflags --libs mmfold against a staged install.  With -DWEAK
 * it declares the API weak and is not linked with -lmmfold, as the header
 * suggests for programs that must run without mmfold.  Prints the library's
 * version and mode, then its JSON report (mmfold_stats_write). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <mmfold.h>

#ifdef WEAK
#pragma weak mmfold_version
#pragma weak mmfold_mode
#pragma weak mmfold_stats_write
#endif

int main(void)
{
#ifdef WEAK
	if (!mmfold_version) {
		printf("mmfold not loaded (header %s)\n", MMFOLD_VERSION);
		return 0;
	}
#endif
	printf("version %s header %s mode %s\n", mmfold_version(), MMFOLD_VERSION, mmfold_mode());
	errno = 0;
	int bad = mmfold_stats_write(1, 42);
	printf("bad format: %d %s\n", bad, errno == EINVAL ? "EINVAL" : strerror(errno));
	fflush(stdout);
	return mmfold_stats_write(1, MMFOLD_FORMAT_JSON) == 0 ? 0 : 1;
}
