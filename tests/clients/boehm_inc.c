/* Real-client test: Boehm GC (libgc) in incremental mode.
 *
 * In incremental mode libgc finds the pages written since the last marking
 * phase with a "virtual dirty bit": it mprotects the heap read-only and
 * takes a SIGSEGV (handled inside libgc) on the first write to each page,
 * then unprotects it.  (libgc 8.2 would rather use the kernel's soft-dirty
 * bits where they work; GC_USE_GETWRITEWATCH=0, set below, makes it use
 * mprotect everywhere.)  This program keeps a large old object graph alive
 * and keeps mutating it while allocating lots of garbage, so the write
 * barrier fires constantly and libgc issues many thousands of mprotect
 * calls.
 *
 * Output is deterministic: a checksum of the final graph and facts that do
 * not depend on collection timing.  Build: cc -O2 boehm_inc.c -lgc
 */
#include <gc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
	struct node *left, *right;
	uint64_t val;
	struct node *extra; /* points to a young object (old -> young edge) */
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static struct node *make_tree(int depth, uint64_t seed)
{
	struct node *n = GC_MALLOC(sizeof *n);
	n->val = seed;
	if (depth > 0) {
		n->left = make_tree(depth - 1, seed * 2 + 1);
		n->right = make_tree(depth - 1, seed * 2 + 2);
	}
	return n;
}

static uint64_t tree_sum(const struct node *n)
{
	uint64_t s = 0;
	while (n) {
		s = s * 1000003u + n->val;
		if (n->extra)
			s ^= n->extra->val * 31u;
		s += tree_sum(n->left);
		n = n->right;
	}
	return s;
}

/* A singly linked list of small objects, mostly garbage soon. */
struct cell {
	struct cell *next;
	uint64_t v;
	char pad[8];
};

#define NOLD 4096

int main(void)
{
	/* libgc 8.2 prefers the kernel's soft-dirty bits when they work and
	 * falls back to mprotect otherwise; "0" makes it use mprotect on every
	 * kernel (set GC_USE_GETWRITEWATCH=1 to let it choose). */
	setenv("GC_USE_GETWRITEWATCH", "0", 0);
	GC_INIT();
	GC_enable_incremental();

	/* Long-lived data: a tree of 2^17 nodes and an array of old cells. */
	struct node *tree = make_tree(16, 1);
	struct cell **old = GC_MALLOC(NOLD * sizeof *old);
	for (int i = 0; i < NOLD; i++) {
		old[i] = GC_MALLOC(sizeof(struct cell));
		old[i]->v = (uint64_t)i;
	}
	/* Flat index of tree nodes so we can mutate random old nodes. */
	size_t ntree = (size_t)1 << 17;
	struct node **idx = GC_MALLOC(ntree * sizeof *idx);
	{
		size_t k = 0, head = 0;
		idx[k++] = tree;
		while (head < k && k < ntree) {
			struct node *n = idx[head++];
			if (n->left && k < ntree)
				idx[k++] = n->left;
			if (n->right && k < ntree)
				idx[k++] = n->right;
		}
		ntree = k;
	}

	uint64_t garbage_sum = 0;
	for (int round = 0; round < 120; round++) {
		/* Lots of short-lived allocation (drives collections). */
		struct cell *list = NULL;
		for (int i = 0; i < 40000; i++) {
			struct cell *c = GC_MALLOC(sizeof *c);
			c->v = rnd() & 0xffff;
			c->next = list;
			list = c;
			if ((i & 1023) == 0) {
				char *s = GC_MALLOC_ATOMIC(256 + (i & 0x3ff));
				memset(s, 'a' + (i % 26), 256);
				garbage_sum += (unsigned char)s[100];
			}
		}
		for (struct cell *c = list; c; c = c->next)
			garbage_sum += c->v;

		/* Mutate old objects: write barrier faults on protected pages. */
		for (int i = 0; i < 6000; i++) {
			struct node *n = idx[rnd() % ntree];
			struct node *y = GC_MALLOC(sizeof *y);
			y->val = rnd() & 0xffffff;
			n->extra = y;
			n->val += 1;
			struct cell *c = old[rnd() % NOLD];
			c->v = c->v * 3 + (uint64_t)round;
			struct cell *nc = GC_MALLOC(sizeof *nc);
			nc->v = (uint64_t)i;
			c->next = nc;
		}
		if (round % 10 == 9)
			GC_gcollect();
	}
	GC_gcollect();

	uint64_t oldsum = 0;
	for (int i = 0; i < NOLD; i++)
		oldsum = oldsum * 31 + old[i]->v + (old[i]->next ? old[i]->next->v : 0);

	printf("tree checksum: %016llx\n", (unsigned long long)tree_sum(tree));
	printf("old cells checksum: %016llx\n", (unsigned long long)oldsum);
	printf("garbage checksum: %016llx\n", (unsigned long long)garbage_sum);
	printf("incremental mode: %s\n", GC_is_incremental_mode() ? "yes" : "no");
	printf("heap write-protected (mprotect dirty bits): %s\n",
	       (GC_incremental_protection_needs() & GC_PROTECTS_POINTER_HEAP) ? "yes" : "no");
	printf("collections happened: %s\n", GC_get_gc_no() > 10 ? "yes" : "no");
	printf("heap below 1 GiB: %s\n",
	       GC_get_heap_size() < ((size_t)1 << 30) ? "yes" : "no");
	return 0;
}
