import Foundation
import RunAtLoad
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `iap_release_free_memory`, which `iap-worker run` calls every 30 s: memory a burst freed inside the heap goes back
/// to the system, where glibc alone keeps it until the heap's top is free.
@Suite struct ReleaseFreeMemoryTests {
    #if canImport(Glibc)
        /// Of the whole pages strictly inside each block (past the first, where glibc writes a free chunk's links,
        /// and before the last), how many are resident (`mincore`).
        static func residentInteriorPages(of blocks: [UnsafeMutableRawPointer], size: Int, page: Int) -> (Int, Int) {
            var resident = 0
            var total = 0
            for block in blocks {
                let start = (Int(bitPattern: block) / page + 1) * page
                let end = (Int(bitPattern: block) + size) / page * page - page
                guard end > start, let first = UnsafeMutableRawPointer(bitPattern: start) else { continue }
                var vector = [UInt8](repeating: 0, count: (end - start) / page)
                guard mincore(first, end - start, &vector) == 0 else { continue }
                total += vector.count
                resident += vector.filter { $0 & 1 != 0 }.count
            }
            return (resident, total)
        }

        @Test func pagesFreedInsideTheHeapGoBackToTheSystem() throws {
            // 4,000 blocks of eight pages (under glibc's mmap threshold, above tcache's sizes: they come from the
            // heap), one after the other; every other one is freed. Each freed block lies between two that stay, so
            // it is a hole no heap top can return (small pins allocated beside them could land anywhere in a heap
            // that has free small chunks, and let the freed blocks merge into the top: a CI run showed it). Their
            // interiors are read with mincore, so nothing else in the process counts.
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            let size = 8 * page
            try #require(size < 128 * 1_024, "a page of \(page) bytes makes the blocks mmap's, not the heap's")
            var blocks: [UnsafeMutableRawPointer] = []
            blocks.reserveCapacity(4_000)
            for _ in 0..<4_000 {
                let block = try #require(malloc(size))
                memset(block, 0x5a, size)  // touched: resident
                blocks.append(block)
            }
            let freed = stride(from: 0, to: blocks.count, by: 2).map { blocks[$0] }
            let kept = stride(from: 1, to: blocks.count, by: 2).map { blocks[$0] }
            defer { for block in kept { free(block) } }
            for block in freed { free(block) }
            // The freed blocks' addresses are only read from here on (mincore), never dereferenced.
            let (before, total) = Self.residentInteriorPages(of: freed, size: size, page: page)
            #expect(total >= 2_000 * 5)
            #expect(before * 10 >= total * 9, "freed, the holes stay resident: \(before) of \(total) pages")
            _ = iap_release_free_memory()
            let (after, _) = Self.residentInteriorPages(of: freed, size: size, page: page)
            // A few holes may have been taken again by another thread's allocation meanwhile: nine in ten go back.
            #expect(after * 10 <= total, "after the pass, \(after) of \(total) interior pages are still resident")
        }
    #endif
}
