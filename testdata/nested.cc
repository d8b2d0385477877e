// nested: an exception thrown and caught inside a destructor while another
// one unwinds past it, and a throw through viaptr(), whose first
// instructions (at -O2) include an indirect call that rtrace relocates.
#include <cstdio>
#include <stdexcept>

void (*fp)(int);

int leaf(int x) { return x + 1; }
void inner_throw(int x)
{
	if (leaf(x))
		throw std::logic_error("inner");
}
struct D {
	int id;
	~D()
	{
		try {
			inner_throw(id);
		} catch (const std::exception &) {
			leaf(id);
		}
	}
};
void thrower(int x) { throw std::runtime_error(x ? "outer" : "zero"); }
int mid(int x)
{
	D d{x};
	thrower(x);
	return 1;
}
int viaptr(int x)
{
	fp(x);
	return 1;
}
int top(int x)
{
	try {
		return mid(x);
	} catch (const std::runtime_error &) {
	}
	try {
		return viaptr(x);
	} catch (const std::runtime_error &) {
		return leaf(x) * 2;
	}
}

int main()
{
	fp = thrower;
	std::printf("nested %d\n", top(1));
	return 0;
}
