#!/usr/bin/env python3
"""sqlgen.py - writes the SQL script of the sqlite3 workload to stdout.

usage: sqlgen.py [ROWS]

Many inserts in transactions of 1,000 rows into a table with two secondary
indexes, updates and deletes through an index, then indexed point and range
queries, a GROUP BY and a join.  Deterministic (fixed seed), so every run of
`sqlite3 :memory: < script` does the same work and prints the same result.
"""
import random
import sys


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rng = random.Random(1234)
    out = []
    w = out.append
    w("PRAGMA cache_size = -16000;")
    w("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
      "email TEXT, city TEXT, score INTEGER, bio TEXT);")
    w("CREATE INDEX users_name ON users(name);")
    w("CREATE INDEX users_city_score ON users(city, score);")
    w("CREATE TABLE orders(id INTEGER PRIMARY KEY, user_id INTEGER, "
      "amount INTEGER, note TEXT);")
    w("CREATE INDEX orders_user ON orders(user_id);")
    cities = ["city%02d" % i for i in range(50)]
    for start in range(0, rows, 1000):
        w("BEGIN;")
        for i in range(start, min(rows, start + 1000)):
            name = "user%07d" % rng.randrange(rows * 4)
            bio = "x" * rng.randrange(10, 200)
            w("INSERT INTO users(name, email, city, score, bio) VALUES "
              "('%s', '%s@example.org', '%s', %d, '%s');"
              % (name, name, rng.choice(cities), rng.randrange(1000), bio))
            w("INSERT INTO orders(user_id, amount, note) VALUES (%d, %d, '%s');"
              % (i + 1, rng.randrange(100000), "n" * rng.randrange(0, 60)))
        w("COMMIT;")
    w("BEGIN;")
    for _ in range(rows // 20):
        w("UPDATE users SET score = score + 1 WHERE name = 'user%07d';"
          % rng.randrange(rows * 4))
    for _ in range(rows // 40):
        w("DELETE FROM orders WHERE user_id = %d;" % rng.randrange(1, rows + 1))
    w("COMMIT;")
    for _ in range(rows // 10):
        w("SELECT count(*), sum(score) FROM users WHERE city = '%s' "
          "AND score BETWEEN %d AND %d;"
          % (rng.choice(cities), rng.randrange(500), 500 + rng.randrange(500)))
        w("SELECT id, email FROM users WHERE name = 'user%07d';"
          % rng.randrange(rows * 4))
    w("SELECT city, count(*), avg(score) FROM users GROUP BY city ORDER BY city;")
    w("SELECT u.city, sum(o.amount) FROM users u JOIN orders o "
      "ON o.user_id = u.id GROUP BY u.city ORDER BY 2 DESC LIMIT 5;")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
