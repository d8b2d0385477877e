// strarg: std::string arguments, recorded with the /S format: by reference
// (count), by value and returned by value (greet), and the library's own
// functions -a shows (constructors, iterator tags returned by value), and
// operator new[] and delete[] as library calls.
#include <cstdio>
#include <string>

using namespace std::string_literals;

int count(const std::string &s) { return (int)s.size(); }
std::string greet(std::string name, int n) { return "Hello "s + name + std::string(n, '!'); }

int main()
{
	std::string s("hello world");
	int *v = new int[4]{1, 2, 3, 4}; // operator new[] and delete[]
	std::printf("strarg %d %s %d\n", count(s), greet("you", 2).c_str(), v[3]);
	delete[] v;
	return 0;
}
