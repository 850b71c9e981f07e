// Types that refer to data they do not own (views and reference wrappers):
// what task-set arguments and Cell values must not be.
#pragma once

#include "shoal/version.hpp"

#include <cstddef>
#include <functional>
#include <span>
#include <string_view>
#include <type_traits>

namespace shoal::detail {

template <class X>
struct IsStringView : std::false_type {};
template <class C, class Tr>
struct IsStringView<std::basic_string_view<C, Tr>> : std::true_type {};
template <class X>
struct IsSpan : std::false_type {};
template <class E, std::size_t N>
struct IsSpan<std::span<E, N>> : std::true_type {};
template <class X>
struct IsRefWrapper : std::false_type {};
template <class X>
struct IsRefWrapper<std::reference_wrapper<X>> : std::true_type {};

}  // namespace shoal::detail
