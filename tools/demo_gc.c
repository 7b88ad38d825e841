/* mmfold demo program: a Boehm GC (libgc) program in incremental mode.
 *
 * A small "record store": every record is a pointer-bearing object with a
 * pointer-free payload allocated right after it.  Both are larger than half
 * a heap block, so each gets a block of its own and the heap ends up as
 * alternating pointer-bearing / pointer-free blocks.
 *
 * In incremental mode libgc tracks writes by write-protecting the heap
 * (GC_USE_GETWRITEWATCH=0, set in main, keeps libgc 8.2 from using the
 * kernel's soft-dirty bits instead where those work): at the start of every
 * collection it calls mprotect(PROT_READ) on each run of pointer-bearing
 * blocks, i.e. here on every record block separately, and its SIGSEGV
 * handler makes a block writable again on the first write.  Only a few
 * records are written between collections, so almost all of those mprotect
 * calls ask for the protection the block already has: they change nothing,
 * and mmfold (safe mode) can answer them without entering the kernel.
 *
 * The output is deterministic (a checksum of the store).
 * Build: cc -O2 demo_gc.c -lgc    Args: [records] [rounds]
 */
#include <gc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAYLOAD 3000 /* > HBLKSIZE/2: one object per heap block */

struct record {
	struct record *next;  /* chain of records */
	unsigned char *data;  /* pointer-free payload */
	struct record *peer;  /* updated now and then */
	uint64_t id, version;
	uint64_t fields[360]; /* pad the record to a block of its own */
};

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	size_t nrec = argc > 1 ? strtoul(argv[1], NULL, 0) : 6000;
	int rounds = argc > 2 ? atoi(argv[2]) : 300;
	if (nrec < 2 || rounds < 1)
		return 2;

	/* libgc 8.2 prefers the kernel's soft-dirty bits when they work and
	 * falls back to mprotect otherwise; "0" makes it use mprotect on every
	 * kernel (set GC_USE_GETWRITEWATCH=1 to let it choose). */
	setenv("GC_USE_GETWRITEWATCH", "0", 0);
	GC_INIT();
	GC_enable_incremental();

	struct record **store = GC_MALLOC(nrec * sizeof *store);
	for (size_t i = 0; i < nrec; i++) {
		struct record *r = GC_MALLOC(sizeof *r);
		r->id = i;
		r->data = GC_MALLOC_ATOMIC(PAYLOAD);
		memset(r->data, (int)(i & 0xff), PAYLOAD);
		r->next = i ? store[i - 1] : NULL;
		for (int f = 0; f < 360; f += 45)
			r->fields[f] = i * 7 + (uint64_t)f;
		store[i] = r;
	}

	uint64_t work = 0;
	for (int round = 0; round < rounds; round++) {
		/* Short-lived garbage: drives the collector. */
		for (int i = 0; i < 4000; i++) {
			uint64_t *tmp = GC_MALLOC(8 * sizeof *tmp);
			tmp[0] = rnd();
			work += tmp[0] & 0xff;
		}
		/* Touch a handful of old records (write-barrier faults). */
		for (int i = 0; i < 8; i++) {
			struct record *r = store[rnd() % nrec];
			r->version++;
			r->peer = store[rnd() % nrec];
			r->fields[r->version % 360] ^= rnd();
		}
		/* Read some payloads (no writes: pages stay protected). */
		for (int i = 0; i < 64; i++)
			work += store[rnd() % nrec]->data[rnd() % PAYLOAD];
		GC_collect_a_little();
		if (round % 3 == 2)
			GC_gcollect();
	}

	uint64_t sum = 0;
	for (size_t i = 0; i < nrec; i++) {
		const struct record *r = store[i];
		sum = sum * 1000003u + r->id + r->version * 31u +
		      (r->peer ? r->peer->id : 0) + r->data[i % PAYLOAD];
		for (int f = 0; f < 360; f += 45)
			sum ^= r->fields[f] + (uint64_t)f;
	}
	printf("records: %zu, rounds: %d\n", nrec, rounds);
	printf("store checksum: %016llx\n", (unsigned long long)sum);
	printf("work checksum: %016llx\n", (unsigned long long)work);
	printf("incremental mode: %s\n", GC_is_incremental_mode() ? "yes" : "no");
	printf("heap write-protected (mprotect dirty bits): %s\n",
	       (GC_incremental_protection_needs() & GC_PROTECTS_POINTER_HEAP) ? "yes" : "no");
	return 0;
}
