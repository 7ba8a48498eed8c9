/* rel_exceptions.cc - C++ exceptions thrown and caught in four threads, bad_alloc through the shim */
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

/*
 * Proves (test_matrix.py): a C++ program that throws and catches exceptions
 * all the time runs unchanged under the shim: the exception objects come
 * from malloc (__cxa_allocate_exception), destructors that allocate run
 * while a frame is unwound, exceptions are rethrown, nested and carried
 * across threads in std::exception_ptr, and a failing operator new throws
 * std::bad_alloc through the shim's own frames (which must have unwind
 * tables) after calling the program's new_handler as often as without it.
 * Everything printed is deterministic; the last line says how many
 * exceptions thrown_here threw, which the test finds in the dump.
 */

#define noinline __attribute__((noinline))

namespace rel {

struct Payload : std::runtime_error {
	std::vector<int> data;
	explicit Payload(int i) : std::runtime_error("payload " + std::to_string(i)),
				  data((size_t)(i % 13) + 1, i) {}
};

/* A destructor that allocates, run by the unwinder between throw and catch. */
struct Cleanup {
	std::string *log;
	int i;
	~Cleanup() { log->append("c" + std::to_string(i % 10)); if (log->size() > 4000) log->clear(); }
};

static std::atomic<long> thrown{0}, nested{0};

static noinline void thrown_here(int i)
{
	thrown++;
	throw Payload(i);
}

static noinline int level3(int i, std::string *log)
{
	Cleanup c{log, i};
	std::string s(40 + i % 50, 'x');	/* freed by the unwinder */

	if (i % 3 == 0)
		thrown_here(i);
	return (int)s.size() + c.i % 2;
}

static noinline int level2(int i, std::string *log)
{
	try {
		return level3(i, log);
	} catch (const Payload &p) {
		if (i % 2 == 0)
			throw;		/* rethrow the same object */
		nested++;
		std::throw_with_nested(std::logic_error("nested " + std::to_string(i)));
	}
}

static long unwrap(const std::exception &e)
{
	long n = (long)std::string(e.what()).size();

	try {
		std::rethrow_if_nested(e);
	} catch (const std::exception &inner) {
		n += 1000 * unwrap(inner);
	}
	return n;
}

static noinline long worker(int id, int rounds)
{
	std::string log;
	long sum = 0;

	for (int i = 0; i < rounds; i++) {
		try {
			sum += level2(i + id, &log);
		} catch (const Payload &p) {
			sum += (long)p.data.size() + p.data[0];
		} catch (const std::exception &e) {
			sum += unwrap(e);
		}
	}
	return sum + (long)log.size();
}

/* An exception made in one thread, rethrown in another. */
static long carried(void)
{
	std::exception_ptr ep;
	long n = 0;

	std::thread t([&ep] {
		try {
			thrown_here(7);
		} catch (...) {
			ep = std::current_exception();
		}
	});
	t.join();
	try {
		std::rethrow_exception(ep);
	} catch (const Payload &p) {
		n = (long)p.data.size();
	}
	return n;
}

static int handler_calls;

static void new_handler(void)
{
	if (++handler_calls == 3)
		std::set_new_handler(nullptr);	/* the next failure throws */
}

static noinline void *huge_new(size_t n)
{
	return ::operator new(n);
}

/* operator new failing: std::bad_alloc through whoever implements it. */
static int bad_allocs(void)
{
	int caught = 0;
	size_t huge = (size_t)1 << 62;

	try {
		void *p = huge_new(huge);
		::operator delete(p);
	} catch (const std::bad_alloc &) {
		caught++;
	}
	std::set_new_handler(new_handler);
	try {
		void *p = huge_new(huge);
		::operator delete(p);
	} catch (const std::bad_alloc &) {
		caught++;
	}
	if (::operator new(huge, std::nothrow) == nullptr)
		caught++;
	try {
		std::vector<long> v;
		v.reserve(huge / 16);
	} catch (const std::length_error &) {
		caught++;
	} catch (const std::bad_alloc &) {
		caught++;
	}
	return caught;
}

} // namespace rel

int main()
{
	const int threads = 4, rounds = 3000;
	std::vector<std::thread> pool;
	std::vector<long> sums(threads);

	for (int t = 0; t < threads; t++)
		pool.emplace_back([t, &sums] { sums[t] = rel::worker(t * 1000, rounds); });
	for (auto &t : pool)
		t.join();
	for (int t = 0; t < threads; t++)
		std::printf("thread %d sum %ld\n", t, sums[t]);
	std::printf("carried %ld\n", rel::carried());
	int caught = rel::bad_allocs();

	std::printf("bad_alloc caught %d, new_handler called %d times\n", caught,
		    rel::handler_calls);
	std::printf("nested %ld\n", (long)rel::nested.load());
	std::printf("thrown_here %ld\n", (long)rel::thrown.load());
	return 0;
}
