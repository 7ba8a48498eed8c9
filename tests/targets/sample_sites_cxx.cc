// sample_sites_cxx.cc - sample_sites through operator new/new[] and delete: sampled estimates in C++
//
// The same five kept sites as sample_sites.c (76 MiB, blocks of 48 bytes to
// 64 KiB), made by new[] (and new for the fixed-size records), and a million
// short-lived blocks churned by new[]/delete[].  Writes its counts to
// $TRUTH_OUT like sample_sites: {"keep_pages": bytes, ..., "allocations": n}.
#include <cstdio>
#include <cstdlib>
#include <cstring>

static size_t kept[5];
static size_t allocations;

struct Record {
	char bytes[200];
};

#define KEEP(fn, idx, size, total)                                             \
	__attribute__((noinline)) static void fn()                             \
	{                                                                      \
		size_t n = (size_t)(total) / (size);                           \
		for (size_t i = 0; i < n; i++) {                               \
			char *p = new char[size];                              \
			std::memset(p, 1, 8);                                  \
			kept[idx] += (size);                                   \
			allocations++;                                         \
		}                                                              \
		__asm__ volatile("" ::: "memory");                             \
	}

KEEP(keep_pages, 0, 4000, 32u << 20)
KEEP(keep_buffers, 2, 65536, 12u << 20)
KEEP(keep_tiny, 3, 48, 8u << 20)
KEEP(keep_strings, 4, 1000, 4u << 20)

/* fixed-size objects through plain operator new */
__attribute__((noinline)) static void keep_records()
{
	size_t n = (20u << 20) / sizeof(Record);

	for (size_t i = 0; i < n; i++) {
		Record *r = new Record;
		std::memset(r->bytes, 1, 8);
		kept[1] += sizeof(Record);
		allocations++;
	}
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void churn()
{
	unsigned long s = 12345;

	for (int i = 0; i < 1000000; i++) {
		s = s * 6364136223846793005ul + 1442695040888963407ul;
		char *p = new char[16 + (s >> 52)];
		__asm__ volatile("" : : "r"(p) : "memory");
		delete[] p;
		allocations++;
	}
}

int main()
{
	keep_pages();
	churn();
	keep_records();
	keep_buffers();
	keep_tiny();
	keep_strings();
	if (std::getenv("TRUTH_OUT")) {
		FILE *f = std::fopen(std::getenv("TRUTH_OUT"), "w");

		if (!f)
			return 2;
		std::fprintf(f, "{\"keep_pages\": %zu, \"keep_records\": %zu, \"keep_buffers\": %zu, "
			     "\"keep_tiny\": %zu, \"keep_strings\": %zu, \"allocations\": %zu}\n",
			     kept[0], kept[1], kept[2], kept[3], kept[4], allocations);
		std::fclose(f);
	}
	return 0;
}
