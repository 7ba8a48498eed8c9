// guard_newhandler.cc - operator new's first try fails, its new_handler makes room, the retry succeeds
//
// The address-space limit is set so that a 3 GiB new[] fails; the handler
// lifts the limit and the real operator's retry gets the block.  That block
// was made by new[] and is freed by delete[]: no mismatch, nothing leaked.
// Prints "new[] ok" and the number of handler calls.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sys/resource.h>
#include <unistd.h>

static int calls;

static void make_room()
{
	struct rlimit r;

	calls++;
	getrlimit(RLIMIT_AS, &r);
	r.rlim_cur = r.rlim_max;
	setrlimit(RLIMIT_AS, &r);
	std::set_new_handler(nullptr);
}

static unsigned long long vm_bytes()
{
	char buf[64] = "";
	FILE *f = std::fopen("/proc/self/statm", "r");

	if (!f)
		return 0;
	if (!std::fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	std::fclose(f);
	return std::strtoull(buf, nullptr, 10) * (unsigned long long)sysconf(_SC_PAGESIZE);
}

int main()
{
	struct rlimit r;
	const size_t big = 3ull << 30;

	getrlimit(RLIMIT_AS, &r);
	r.rlim_cur = vm_bytes() + (1ull << 30);
	if (setrlimit(RLIMIT_AS, &r) != 0)
		return 2;
	std::set_new_handler(make_room);
	char *p = new char[big];
	std::memset(p, 1, 4096);
	std::printf("new[] ok, handler calls %d\n", calls);
	delete[] p;
	return 0;
}
