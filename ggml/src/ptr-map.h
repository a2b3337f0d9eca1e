// ptr-map.h - a hash map from pointers (tensors) to small values, open addressing with linear
// probing, for the per-graph bookkeeping of the scheduler and the graph allocator. clear() keeps
// the slots, so building the same kind of graph every token allocates nothing, and a lookup is a
// multiply and a few adjacent slots instead of a list node per element (std::unordered_map).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <vector>

template <typename V>
class ggml_ptr_map {
public:
    // Empties the map, keeping its capacity.
    void clear() {
        for (size_t i : used_) slots_[i].key = nullptr;
        used_.clear();
    }

    // Room for n entries without growing.
    void reserve(size_t n) {
        if (2 * n > slots_.size()) grow(2 * n);
    }

    size_t size() const { return used_.size(); }

    // The value of k, inserted (value-initialized) if absent.
    V & operator[](const void * k) {
        if (2 * (used_.size() + 1) > slots_.size()) grow(2 * (used_.size() + 1));
        size_t i = home(k);
        while (slots_[i].key != nullptr && slots_[i].key != k) i = (i + 1) & (slots_.size() - 1);
        if (slots_[i].key == nullptr) {
            slots_[i].key = k;
            slots_[i].value = V();
            used_.push_back(i);
        }
        return slots_[i].value;
    }

    // The value of k, or NULL if absent.
    V * find(const void * k) { return const_cast<V *>(static_cast<const ggml_ptr_map *>(this)->find(k)); }
    const V * find(const void * k) const {
        if (slots_.empty()) return nullptr;
        for (size_t i = home(k);; i = (i + 1) & (slots_.size() - 1)) {
            if (slots_[i].key == k) return &slots_[i].value;
            if (slots_[i].key == nullptr) return nullptr;
        }
    }

    bool contains(const void * k) const { return find(k) != nullptr; }

private:
    struct slot {
        const void * key = nullptr;
        V value{};
    };
    std::vector<slot> slots_;   // a power of two, at most half full
    std::vector<size_t> used_;  // the slots holding keys, in insertion order

    size_t home(const void * k) const {
        // Fibonacci hashing: the multiply spreads the pointer's bits into the high ones.
        return (size_t) (((uint64_t) (uintptr_t) k * 0x9E3779B97F4A7C15ull) >> 32) & (slots_.size() - 1);
    }

    void grow(size_t want) {
        size_t n = 64;
        while (n < want) n *= 2;
        std::vector<slot> old;
        old.swap(slots_);
        std::vector<size_t> old_used;
        old_used.swap(used_);
        slots_.assign(n, slot());
        used_.reserve(n / 2);
        for (size_t i : old_used) (*this)[old[i].key] = old[i].value;
    }
};
