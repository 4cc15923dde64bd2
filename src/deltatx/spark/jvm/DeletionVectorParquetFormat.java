package io.deltatx.spark;

import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.net.URLDecoder;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.zip.CRC32;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.TaskContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.util.SerializableConfiguration;
import org.apache.spark.util.TaskCompletionListener;
import org.roaringbitmap.BatchIterator;
import org.roaringbitmap.RoaringBitmap;

/**
 * Spark's Parquet reader, giving only the rows that the Delta table's deletion vectors keep.
 *
 * <p>deltatx (Python) plans the scan and names, in the option {@link #VECTORS_OPTION}, every
 * file it reads and where that file's deletion vector is stored. Each task reads the vectors of
 * its own files, so what a task carries grows with the number of files and never with the
 * number of deleted rows. A file with a vector is read whole by one task with no filter pushed
 * into the Parquet reader, so its rows arrive in file order and their positions are counted
 * here rather than asked of Spark's reader (which fills a row-position column one boxed value
 * at a time); the count is checked against the file's {@code numRecords} at its end. The
 * deleted rows are dropped from each batch in place, so the plan above the scan is exactly
 * Spark's plain Parquet plan. Files without a vector read exactly as Parquet does.
 *
 * <p>Compiled by deltatx with Janino, the compiler Spark ships, so it needs no JDK: it keeps to
 * the Java that Janino accepts (raw Scala types, explicit casts, no lambdas).
 */
public class DeletionVectorParquetFormat extends ParquetFileFormat {
  /**
   * One line per file: the URL-encoded file URI, a tab, then {@code -} for a file without a
   * vector, {@code f<TAB>vector file URI<TAB>offset<TAB>size<TAB>cardinality<TAB>numRecords}
   * for a stored vector, or {@code i<TAB>hex bitmap<TAB>cardinality<TAB>numRecords} for an
   * inline one ({@code numRecords} is -1 when the log does not record it).
   */
  public static final String VECTORS_OPTION = "deltatx.deletionVectors";

  static final int PORTABLE_MAGIC = 1681511377;
  static final int NATIVE_MAGIC = 1681511376;

  private transient String parsedText;
  private transient HashMap parsed;

  public String shortName() {
    return "deltatx-parquet";
  }

  public String toString() {
    return "Parquet with deletion vectors";
  }

  public boolean equals(Object other) {
    return other instanceof DeletionVectorParquetFormat;
  }

  public int hashCode() {
    return DeletionVectorParquetFormat.class.hashCode();
  }

  /** A file with a vector is read whole: its rows are counted from the first. */
  public boolean isSplitable(
      SparkSession spark, scala.collection.immutable.Map options, Path path) {
    Object spec = vectors(options).get(key(path));
    if (spec != null && !"-".equals(spec)) {
      return false;
    }
    return super.isSplitable(spark, options, path);
  }

  /**
   * Batches only where every column read can have its rows moved down in place; a schema with
   * another type (variant, say) is read row by row, skipping the deleted rows.
   */
  public boolean supportBatch(SparkSession spark, StructType schema) {
    return movable(schema) && super.supportBatch(spark, schema);
  }

  public scala.Function1 buildReaderWithPartitionValues(
      SparkSession spark,
      StructType dataSchema,
      StructType partitionSchema,
      StructType requiredSchema,
      scala.collection.immutable.Seq filters,
      scala.collection.immutable.Map options,
      Configuration hadoopConf) {
    if (partitionSchema.length() != 0) {
      throw new IllegalArgumentException(
          "deltatx scan: partition values come from the log, not from directory names");
    }
    // Each reader Spark builds broadcasts the Hadoop configuration: build the one that pushes
    // filters only when there is a filter to push.
    scala.Function1 whole =
        super.buildReaderWithPartitionValues(
            spark,
            dataSchema,
            partitionSchema,
            requiredSchema,
            (scala.collection.immutable.Seq) scala.collection.immutable.Nil$.MODULE$,
            options,
            hadoopConf);
    scala.Function1 filtered =
        filters.isEmpty()
            ? whole
            : super.buildReaderWithPartitionValues(
                spark, dataSchema, partitionSchema, requiredSchema, filters, options, hadoopConf);
    return new Reader(
        filtered,
        whole,
        vectors(options),
        spark.sparkContext().broadcast(
            new SerializableConfiguration(hadoopConf),
            scala.reflect.ClassTag$.MODULE$.apply(SerializableConfiguration.class)),
        new BatchCompactor(requiredSchema));
  }

  /** Whether every column of {@code schema} is of a type {@link BatchCompactor} can move. */
  static boolean movable(StructType schema) {
    StructField[] fields = schema.fields();
    for (int i = 0; i < fields.length; i++) {
      if (BatchCompactor.kind(fields[i].dataType()) == BatchCompactor.UNMOVABLE) {
        return false;
      }
    }
    return true;
  }

  private synchronized HashMap vectors(scala.collection.immutable.Map options) {
    String text = (String) options.get(VECTORS_OPTION).getOrElse(null);
    if (text == null) {
      throw new IllegalArgumentException("the option " + VECTORS_OPTION + " is required");
    }
    if (!text.equals(parsedText)) {
      HashMap out = new HashMap();
      String[] lines = text.split("\n");
      for (int i = 0; i < lines.length; i++) {
        if (lines[i].isEmpty()) {
          continue;
        }
        int tab = lines[i].indexOf('\t');
        out.put(key(new Path(decode(lines[i].substring(0, tab)))), lines[i].substring(tab + 1));
      }
      parsed = out;
      parsedText = text;
    }
    return parsed;
  }

  /** A file's identity whatever way its URI is spelt ({@code file:/x} or {@code file:///x}). */
  static String key(Path path) {
    URI uri = path.toUri();
    if (uri.getScheme() == null) {
      throw new IllegalArgumentException("deltatx names files by URI, not " + path);
    }
    String authority = uri.getAuthority() == null ? "" : uri.getAuthority();
    return uri.getScheme() + "://" + authority + uri.getPath();
  }

  static String decode(String text) {
    return URLDecoder.decode(text, StandardCharsets.UTF_8);
  }

  static byte[] hex(String text) {
    byte[] out = new byte[text.length() / 2];
    for (int i = 0; i < out.length; i++) {
      out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
    }
    return out;
  }

  /** The 32-bit bitmaps of a serialized RoaringBitmapArray, by high key (null where empty). */
  static RoaringBitmap[] parse(byte[] data) throws IOException {
    ByteBuffer in = ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
    List keys = new ArrayList();
    List maps = new ArrayList();
    int magic = in.getInt();
    if (magic == PORTABLE_MAGIC) {
      long count = in.getLong();
      int previous = -1;
      for (long i = 0; i < count; i++) {
        int key = in.getInt();
        if (key < 0 || key <= previous) {
          throw new IOException("bad RoaringBitmapArray bucket key " + key);
        }
        previous = key;
        RoaringBitmap map = new RoaringBitmap();
        map.deserialize(((ByteBuffer) in.slice()).order(ByteOrder.LITTLE_ENDIAN));
        in.position(in.position() + map.serializedSizeInBytes());
        keys.add(Integer.valueOf(key));
        maps.add(map);
      }
    } else if (Integer.reverseBytes(magic) == NATIVE_MAGIC) {
      in.order(ByteOrder.BIG_ENDIAN);
      int count = in.getInt();
      for (int i = 0; i < count; i++) {
        int size = in.getInt();
        RoaringBitmap map = new RoaringBitmap();
        map.deserialize(((ByteBuffer) in.slice()).order(ByteOrder.LITTLE_ENDIAN));
        if (map.serializedSizeInBytes() != size) {
          throw new IOException("a native bitmap is not of its recorded size " + size);
        }
        in.position(in.position() + size);
        keys.add(Integer.valueOf(i));
        maps.add(map);
      }
    } else {
      throw new IOException(
          "bad deletion vector magic number " + magic + " (expected " + PORTABLE_MAGIC + ")");
    }
    if (in.hasRemaining()) {
      throw new IOException(in.remaining() + " unexpected bytes after the bitmap");
    }
    int top = keys.isEmpty() ? 0 : ((Integer) keys.get(keys.size() - 1)).intValue() + 1;
    RoaringBitmap[] out = new RoaringBitmap[top];
    for (int i = 0; i < keys.size(); i++) {
      out[((Integer) keys.get(i)).intValue()] = (RoaringBitmap) maps.get(i);
    }
    return out;
  }

  /** Reads one file: the rows its deletion vector keeps. */
  static final class Reader extends scala.runtime.AbstractFunction1 implements Serializable {
    private final scala.Function1 filtered;
    private final scala.Function1 whole;
    private final HashMap vectors;
    private final Broadcast conf;
    private final BatchCompactor compactor;
    private transient HashMap streams;

    Reader(
        scala.Function1 filtered,
        scala.Function1 whole,
        HashMap vectors,
        Broadcast conf,
        BatchCompactor compactor) {
      this.filtered = filtered;
      this.whole = whole;
      this.vectors = vectors;
      this.conf = conf;
      this.compactor = compactor;
    }

    private static IllegalStateException unreadable(String where, Exception cause) {
      return new IllegalStateException(
          "deltatx scan: the " + where + " cannot be read: " + cause, cause);
    }

    /**
     * The open vector file at {@code uri}, its version checked. One delete writes the vectors
     * of all its files into one file, so a task keeps each file it opens until it ends.
     */
    private FSDataInputStream stream(String uri) throws IOException {
      if (streams == null) {
        streams = new HashMap();
        final HashMap opened = streams;
        TaskContext task = TaskContext.get();
        if (task != null) {
          task.addTaskCompletionListener(
              new TaskCompletionListener() {
                public void onTaskCompletion(TaskContext context) {
                  java.util.Iterator each = opened.values().iterator();
                  while (each.hasNext()) {
                    try {
                      ((FSDataInputStream) each.next()).close();
                    } catch (IOException e) {
                      // Read-only streams: nothing is lost when one fails to close.
                    }
                  }
                }
              });
        }
      }
      FSDataInputStream in = (FSDataInputStream) streams.get(uri);
      if (in == null) {
        Path path = new Path(uri);
        FileSystem fs = path.getFileSystem(((SerializableConfiguration) conf.value()).value());
        in = fs.open(path);
        streams.put(uri, in);
        byte[] version = new byte[1];
        in.readFully(0, version);
        if (version[0] != 1) {
          throw new IOException("unknown deletion vector file version " + version[0]);
        }
      }
      return in;
    }

    public Object apply(Object argument) {
      PartitionedFile file = (PartitionedFile) argument;
      String name = key(file.toPath());
      String spec = (String) vectors.get(name);
      if (spec == null) {
        throw new IllegalStateException(
            "deltatx scan: data file " + name + " is not among the files the log names");
      }
      if (spec.equals("-")) {
        return filtered.apply(file);
      }
      if (file.start() != 0) {
        throw new IllegalStateException(
            "deltatx scan: data file " + name + " has a deletion vector but was split");
      }
      String[] parts = spec.split("\t");
      String where = "deletion vector of data file " + name;
      RoaringBitmap[] bitmaps;
      long cardinality;
      long records;
      try {
        if (parts[0].equals("i")) {
          bitmaps = parse(hex(parts[1]));
          cardinality = Long.parseLong(parts[2]);
          records = Long.parseLong(parts[3]);
        } else {
          String vector = decode(parts[1]);
          where = where + " (file " + vector + " at offset " + parts[2] + ")";
          bitmaps = parse(read(vector, Long.parseLong(parts[2]), Integer.parseInt(parts[3])));
          cardinality = Long.parseLong(parts[4]);
          records = Long.parseLong(parts[5]);
        }
      } catch (IOException e) {
        throw unreadable(where, e);
      } catch (RuntimeException e) {
        // A truncated bitmap runs the buffer out.
        throw unreadable(where, e);
      }
      long total = 0;
      for (int i = 0; i < bitmaps.length; i++) {
        total += bitmaps[i] == null ? 0 : bitmaps[i].getLongCardinality();
      }
      if (total != cardinality) {
        throw new IllegalStateException("deltatx scan: the " + where + " holds " + total
            + " rows where the log says " + cardinality);
      }
      scala.collection.Iterator rows = (scala.collection.Iterator) whole.apply(file);
      return new Rows(rows, bitmaps, records, compactor, name);
    }

    private byte[] read(String uri, long offset, int size) throws IOException {
      byte[] framed = new byte[size + 8];
      stream(uri).readFully(offset, framed);
      ByteBuffer frame = ByteBuffer.wrap(framed).order(ByteOrder.BIG_ENDIAN);
      int stored = frame.getInt(0);
      if (stored != size) {
        throw new IOException(
            "the file stores a " + stored + "-byte deletion vector, the log says " + size);
      }
      byte[] bitmap = new byte[size];
      System.arraycopy(framed, 4, bitmap, 0, size);
      CRC32 crc = new CRC32();
      crc.update(bitmap, 0, size);
      if ((int) crc.getValue() != frame.getInt(4 + size)) {
        throw new IOException("checksum mismatch (corrupt file)");
      }
      return bitmap;
    }
  }

  /**
   * The rows of one file that its deletion vector keeps. A batch has its kept rows moved down
   * in its own column vectors and is then shortened, so the plan above the scan is Spark's
   * plain Parquet plan; read row by row, a deleted row is skipped.
   */
  static final class Rows extends scala.collection.AbstractIterator {
    private final scala.collection.Iterator rows;
    private final RoaringBitmap[] bitmaps;
    private final long records;
    private final BatchCompactor compactor;
    private final String name;
    // The position in the file of the next row the reader gives.
    private long next;
    private Object ahead;
    private int[] kept = new int[0];
    // The deleted rows not yet reached, taken from the bitmaps a buffer at a time: rows come
    // in file order, so each deleted row is looked at once, in bulk, whatever the batch size.
    private final int[] pending = new int[1024];
    private int at;
    private int count;
    private int key = -1;
    private BatchIterator batches;
    private boolean exhausted;

    Rows(
        scala.collection.Iterator rows,
        RoaringBitmap[] bitmaps,
        long records,
        BatchCompactor compactor,
        String name) {
      this.rows = rows;
      this.bitmaps = bitmaps;
      this.records = records;
      this.compactor = compactor;
      this.name = name;
    }

    public boolean hasNext() {
      while (ahead == null) {
        if (!rows.hasNext()) {
          finish();
          return false;
        }
        Object item = rows.next();
        if (item instanceof ColumnarBatch) {
          ahead = compact((ColumnarBatch) item);
        } else if (!deleted(next++)) {
          ahead = item;
        }
      }
      return true;
    }

    public Object next() {
      if (!hasNext()) {
        throw new java.util.NoSuchElementException("deltatx scan: no more rows in " + name);
      }
      Object item = ahead;
      ahead = null;
      return item;
    }

    /** Checks, once the reader is done, that the file and its vector agree with the log. */
    private void finish() {
      if (records >= 0 && next != records) {
        throw new IllegalStateException("deltatx scan: read " + next + " rows of data file "
            + name + " where the log records " + records);
      }
      if (!exhausted && (at < count || refill())) {
        throw new IllegalStateException("deltatx scan: the deletion vector of data file "
            + name + " deletes row " + current() + " of its " + next);
      }
      exhausted = true;
    }

    private ColumnarBatch compact(ColumnarBatch batch) {
      int n = batch.numRows();
      long start = next;
      long end = start + n;
      next = end;
      if (kept.length < n) {
        kept = new int[Math.max(n, 4096)];
      }
      int first = -1;
      int size = 0;
      int from = 0;
      while (!exhausted) {
        if (at == count && !refill()) {
          exhausted = true;
          break;
        }
        long row = current();
        if (row >= end) {
          break;
        }
        int offset = (int) (row - start);
        if (first < 0) {
          // The rows before the first deleted one stay where they are.
          first = offset;
          size = offset;
          from = offset;
        }
        for (int r = from; r < offset; r++) {
          kept[size++] = r;
        }
        from = offset + 1;
        at++;
      }
      if (first < 0) {
        return batch;
      }
      for (int r = from; r < n; r++) {
        kept[size++] = r;
      }
      compactor.move(batch, kept, first, size);
      batch.setNumRows(size);
      return batch;
    }

    /** Whether the row at {@code row}, the next in file order, is deleted. */
    private boolean deleted(long row) {
      while (!exhausted) {
        if (at == count && !refill()) {
          exhausted = true;
          return false;
        }
        long found = current();
        if (found > row) {
          return false;
        }
        at++;
        if (found == row) {
          return true;
        }
      }
      return false;
    }

    private long current() {
      return (((long) key) << 32) | (pending[at] & 0xFFFFFFFFL);
    }

    /** Takes the next deleted rows into {@code pending}; false when there are no more. */
    private boolean refill() {
      while (true) {
        if (batches != null && batches.hasNext()) {
          count = batches.nextBatch(pending);
          at = 0;
          if (count > 0) {
            return true;
          }
        } else {
          key++;
          if (key >= bitmaps.length) {
            return false;
          }
          batches = bitmaps[key] == null ? null : bitmaps[key].getBatchIterator();
        }
      }
    }
  }
}
