// cxx: namespaces, templates, a class with methods.
#include <cstdio>

namespace geo {
template <typename T> T twice(T x) { return x + x; }

class Shape {
public:
	explicit Shape(int s) : side(s) {}
	int area() const { return twice(side) * side / 2; }
private:
	int side;
};
} // namespace geo

namespace util {
namespace inner {
int count(int n) { return n <= 0 ? 0 : 1 + count(n - 1); }
} // namespace inner
} // namespace util

int main()
{
	geo::Shape s(3);
	int a = s.area();
	double d = geo::twice(1.5);
	std::printf("cxx %d %.1f %d\n", a, d, util::inner::count(3));
	return 0;
}
