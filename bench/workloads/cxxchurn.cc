/* cxxchurn.cc - C++ container and string churn: string, vector, map, unordered_map */
/*
 * usage: cxxchurn [ROUNDS]
 *
 * A stand-in for the allocation pattern of a C++ service: request objects
 * built from strings, indexed in ordered and hashed maps, kept in a bounded
 * working set and retired in random order.  Every round builds and destroys
 * temporaries (string concatenation, vector growth), and inserts into and
 * erases from the maps, so operator new/delete dominate.  Deterministic: the
 * checksum on stdout is the same on every run.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

struct Rng {
	uint64_t s;
	explicit Rng(uint64_t seed) : s(seed) {}
	uint64_t next()
	{
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		return s * 0x2545f4914f6cdd1dULL;
	}
	size_t below(size_t n) { return (size_t)(next() % n); }
};

struct Request {
	std::string path;
	std::vector<std::string> headers;
	std::vector<int> payload;
};

const size_t kWorkingSet = 2000;

/* A path of random length: about half fit in the small-string buffer. */
std::string make_path(Rng &rng)
{
	std::string s = "/api/v1/";
	size_t n = rng.below(40);
	for (size_t i = 0; i < n; i++)
		s += (char)('a' + rng.below(26));
	return s;
}

Request make_request(Rng &rng)
{
	Request r;
	r.path = make_path(rng);
	size_t nh = 1 + rng.below(6);
	for (size_t i = 0; i < nh; i++)
		r.headers.push_back("X-Header-" + std::to_string(rng.next() % 100000) +
				    ": " + std::string(rng.below(48), 'v'));
	size_t np = rng.below(64);
	for (size_t i = 0; i < np; i++)
		r.payload.push_back((int)rng.below(1000));
	return r;
}

}  // namespace

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? std::atol(argv[1]) : 180000;
	Rng rng(42);
	std::map<uint64_t, Request> by_id;
	std::unordered_map<std::string, std::vector<uint64_t>> by_path;
	std::vector<uint64_t> ids;
	uint64_t next_id = 1, checksum = 0;

	for (long round = 0; round < rounds; round++) {
		Request r = make_request(rng);
		uint64_t id = next_id++;

		by_path[r.path].push_back(id);
		checksum += r.path.size() + r.headers.size() + r.payload.size();
		by_id.emplace(id, std::move(r));
		ids.push_back(id);

		if (ids.size() > kWorkingSet) {
			/* Retire a random request from the working set. */
			size_t k = rng.below(ids.size());
			uint64_t victim = ids[k];
			ids[k] = ids.back();
			ids.pop_back();
			auto it = by_id.find(victim);
			auto pit = by_path.find(it->second.path);
			std::vector<uint64_t> &v = pit->second;
			for (size_t i = 0; i < v.size(); i++)
				if (v[i] == victim) {
					v[i] = v.back();
					v.pop_back();
					break;
				}
			if (v.empty())
				by_path.erase(pit);
			by_id.erase(it);
		}
		if (round % 1000 == 999) {
			/* A report: a sorted copy of some paths, thrown away. */
			std::vector<std::string> paths;
			for (auto &kv : by_path)
				paths.push_back(kv.first);
			std::map<std::string, size_t> counts;
			for (auto &p : paths)
				counts[p.substr(0, 12)]++;
			checksum += counts.size();
		}
	}
	std::printf("cxxchurn: rounds=%ld live=%zu checksum=%llu\n", rounds, by_id.size(),
		    (unsigned long long)checksum);
	return 0;
}
