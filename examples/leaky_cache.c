/* leaky_cache.c - heaptrail's demo: a toy request handler whose response cache leaks */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Each request, "GET /item/42 alice", goes through handle_request():
 *
 *   parse_request()      splits the line into words, each copied into a
 *                        strdup()'d temporary that is freed at once: the
 *                        "temporary allocations" of the report;
 *   lookup_user()        finds or adds the user in a small table that is
 *                        freed at shutdown: no leak;
 *   render_page()        builds the response body;
 *   remember_response()  keeps body and key in a cache that is never trimmed
 *                        nor freed: it grows with every request, and what
 *                        is left at exit is the leak heaptrail reports.
 *
 *   make demo   builds this, records it and prints the report.
 */

#define REQUESTS 500

struct user {
	char name[32];
	int visits;
	struct user *next;
};

struct cached {
	char *key;
	char *body;
	size_t len;
	struct cached *next;
};

static struct user *users;
static struct cached *cache;	/* BUG: nothing ever removes or frees an entry */

static struct user *lookup_user(const char *name)
{
	struct user *u;

	for (u = users; u; u = u->next)
		if (strcmp(u->name, name) == 0)
			return u;
	u = calloc(1, sizeof(*u));
	if (!u)
		abort();
	snprintf(u->name, sizeof(u->name), "%s", name);
	u->next = users;
	users = u;
	return u;
}

static void free_users(void)
{
	while (users) {
		struct user *next = users->next;

		free(users);
		users = next;
	}
}

static char *render_page(const struct user *u, const char *path, size_t *len)
{
	char *body = malloc(256);

	if (!body)
		abort();
	*len = (size_t)snprintf(body, 256, "<p>hello %s, visit %d, you asked for %s</p>",
				u->name, u->visits, path);
	return body;
}

static void remember_response(const char *key, char *body, size_t len)
{
	struct cached *c = malloc(sizeof(*c));

	if (!c)
		abort();
	c->key = strdup(key);
	c->body = body;
	c->len = len;
	c->next = cache;
	cache = c;
}

/* Lower-cases a word in place. */
static void normalize(char *w)
{
	for (; *w; w++)
		if (*w >= 'A' && *w <= 'Z')
			*w = (char)(*w - 'A' + 'a');
}

/* "GET /item/42 alice" -> path and user; 0 when the line is not a request. */
static int parse_request(const char *line, char *path, size_t plen, char *user, size_t ulen)
{
	char *copy = strdup(line), *save = NULL, *word;
	int n = 0, ok = 1;

	if (!copy)
		abort();
	for (word = strtok_r(copy, " ", &save); word; word = strtok_r(NULL, " ", &save), n++) {
		/* A temporary copy per word: allocated, used, freed at once. */
		char *w = strdup(word);

		if (!w)
			abort();
		normalize(w);
		if (n == 0)
			ok = strcmp(w, "get") == 0;
		else if (n == 1)
			snprintf(path, plen, "%s", w);
		else if (n == 2)
			snprintf(user, ulen, "%s", w);
		free(w);
	}
	free(copy);
	return ok && n == 3;
}

static void handle_request(const char *line)
{
	char path[64], name[32];
	struct user *u;
	size_t len;
	char *body;

	if (!parse_request(line, path, sizeof(path), name, sizeof(name)))
		return;
	u = lookup_user(name);
	u->visits++;
	body = render_page(u, path, &len);
	remember_response(line, body, len);
}

int main(void)
{
	static const char *names[] = { "alice", "bob", "carol", "dave", "erin" };
	char line[128];
	int i;

	for (i = 0; i < REQUESTS; i++) {
		snprintf(line, sizeof(line), "GET /item/%d %s", i, names[i % 5]);
		handle_request(line);
	}
	free_users();
	/* dprintf: no stdio buffer, so the demo's only leaks are the cache's. */
	dprintf(1, "leaky_cache: served %d requests, %d users, cache never trimmed\n",
		REQUESTS, 5);
	return 0;
}
