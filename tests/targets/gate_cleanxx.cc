/* gate_cleanxx.cc - a C++ program that frees everything: iostreams, strings, exceptions, a thread */
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "truth.h"

/*
 * Proves: a C++ program freeing all it allocates passes
 * 'gate --max-leaked 0' while libstdc++ keeps its emergency exception pool
 * (72,704 bytes with gcc 12), std::cout's stdio buffer and a thread's TLS;
 * with 'unsync', after std::ios::sync_with_stdio(false), libstdc++'s own
 * buffers of the standard streams instead of stdio's.
 */

static void work()
{
	std::vector<std::string> v;

	for (int i = 0; i < 20; i++)
		v.push_back(std::string(64 + i, 'x'));
	auto p = std::make_unique<int[]>(100);
	p[0] = (int)v.size();
	try {
		throw std::runtime_error("thrown and caught");
	} catch (const std::exception &e) {
		std::cout << "caught: " << e.what() << std::endl;
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && std::string(argv[1]) == "unsync")
		std::ios::sync_with_stdio(false);
	truth_set_exact(0, 0);
	std::thread t(work);
	t.join();
	work();
	std::cout << "gate_cleanxx done" << std::endl;
	truth_write();
	return 0;
}
