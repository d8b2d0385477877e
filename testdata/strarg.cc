// strarg: std::string arguments, recorded with the /S format: by reference
// (count), by value and returned by value (greet), and the library's own
// functions -a shows (constructors, iterator tags returned by value).
#include <cstdio>
#include <string>

using namespace std::string_literals;

int count(const std::string &s) { return (int)s.size(); }
std::string greet(std::string name, int n) { return "Hello "s + name + std::string(n, '!'); }

int main()
{
	std::string s("hello world");
	std::printf("strarg %d %s\n", count(s), greet("you", 2).c_str());
	return 0;
}
