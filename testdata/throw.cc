// throw: C++ exceptions thrown through traced frames, with destructors
// running during unwinding and a rethrow.
#include <cstdio>
#include <stdexcept>

volatile int sink;

struct Guard {
	int id;
	explicit Guard(int i) : id(i) {}
	~Guard() { sink = id; }
};

int leaf(int x) { return x + 1; }

void thrower(int x)
{
	Guard g(x);
	if (leaf(x) > 2)
		throw std::runtime_error("too big");
}

void middle(int x)
{
	Guard g(x);
	thrower(x + 1);
}

int rethrower(int x)
{
	try {
		middle(x);
	} catch (const std::runtime_error &) {
		sink = leaf(x);
		throw;
	}
	return 0;
}

int outer(int x)
{
	try {
		return rethrower(x);
	} catch (const std::exception &e) {
		return leaf(x) * 10;
	}
}

int main()
{
	int r = outer(1) + outer(2);
	std::printf("throw %d %d\n", r, leaf(r));
	return 0;
}
